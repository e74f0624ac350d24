#!/usr/bin/env python3
"""Are the answers right, short and quick? A factual-question benchmark through the real call path.

    .venv/bin/python scripts/bench_answers.py [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b,smollm2-135m]
                                              [--threads 1 --batch-threads 1] [--busy] [--limit N]

Starts a gateway in this process (offline models; the LLM on llama.cpp unless ``--backend`` says
otherwise), places one WebRTC call on loopback per model and asks each question as a typed turn on
the ``oai-events`` data channel (``conversation.item.create`` + ``response.create``, text output),
with the gateway's default instructions. Between questions the turn's items are deleted, so every
question is asked afresh. An answer is right when it matches the question's accepted pattern.

Per model it prints: accuracy, median words per answer, time to first token (p50/p95, from
``response.create`` to the first ``response.output_text.delta``) and decode tokens/s (output
tokens after the first, over the time from the first delta to ``response.done``); then a
multi-turn check that the call remembers what the caller said two turns earlier. ``--busy`` keeps
the other core busy with a niced spinning process (killed at the end), as STT, TTS or another
call would. ``-v`` prints every answer.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import resource
import statistics
import subprocess
import sys
import time
from typing import Optional

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.models.backends import load_backend
from gateway.models.base import ModelSet
from gateway.models.loader import load_models
from gateway.server.runner import free_port, running_gateway

# (question, accepted answer as a regular expression, matched case-insensitively)
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", r"\bparis\b"),
    ("What is the capital of Japan?", r"\btokyo\b"),
    ("What is the largest planet in our solar system?", r"\bjupiter\b"),
    ("At what temperature in Celsius does water freeze?", r"\b(0|zero)\b"),
    ("At what temperature in Celsius does water boil at sea level?", r"\b100\b|hundred"),
    ("How many continents are there?", r"\b(7|seven)\b"),
    ("What language is mainly spoken in Spain?", r"\bspanish\b"),
    ("Who wrote Romeo and Juliet?", r"shakespeare"),
    ("What is the chemical symbol for gold?", r"\bau\b"),
    ("How many days are in a leap year?", r"\b366\b|three hundred (and )?sixty[- ]six"),
    ("Which planet is known as the Red Planet?", r"\bmars\b"),
    ("What is the largest ocean on Earth?", r"\bpacific\b"),
    ("How many legs does a spider have?", r"\b(8|eight)\b"),
    ("Which gas do plants take from the air for photosynthesis?", r"carbon dioxide|\bco2\b|co₂"),
    ("Who painted the Mona Lisa?", r"leonardo|da vinci"),
    ("What is the tallest mountain in the world?", r"everest"),
    ("How many minutes are in an hour?", r"\b(60|sixty)\b"),
    ("What is the capital of Italy?", r"\brome\b"),
    ("What is the square root of 81?", r"\b(9|nine)\b"),
    ("What is 12 times 12?", r"\b144\b|one hundred (and )?forty[- ]four"),
    ("What is the currency of the United Kingdom?", r"pound|sterling"),
    ("Which animal is known as the king of the jungle?", r"\blions?\b"),
    ("What is the hardest natural substance?", r"diamond"),
    ("How many sides does a hexagon have?", r"\b(6|six)\b"),
    ("What is the capital of Australia?", r"canberra"),
    ("What is the longest river in Africa?", r"\bnile\b"),
    ("Which element has the chemical symbol O?", r"oxygen"),
    ("In which country are the pyramids of Giza?", r"egypt"),
    ("How many hours are in a day?", r"\b(24|twenty[- ]four)\b"),
    ("What is the freezing point of water in Fahrenheit?", r"\b32\b|thirty[- ]two"),
    ("What is the capital of Canada?", r"ottawa"),
    ("Who was the first person to walk on the Moon?", r"armstrong"),
    ("What is the largest mammal?", r"blue whale"),
    ("What color do you get when you mix blue and yellow?", r"\bgreen\b"),
    ("How many strings does a standard guitar have?", r"\b(6|six)\b"),
    ("What is the main language spoken in Brazil?", r"portuguese"),
    ("How many players does a soccer team have on the field?", r"\b(11|eleven)\b"),
    ("What is the capital of Germany?", r"\bberlin\b"),
    ("What is H2O commonly called?", r"\bwater\b"),
    ("Which is the closest star to Earth?", r"\bsun\b|proxima"),
)

# The multi-turn check: (what the caller says, pattern the answer must match or None).
MEMORY_TURNS: tuple[tuple[str, Optional[str]], ...] = (
    ("Hi, my name is Priya and I live in Toronto.", None),
    ("What is two plus three?", r"\b(5|five)\b"),
    ("What is my name, and which city do I live in?", r"priya.*toronto|toronto.*priya"),
)


@dataclasses.dataclass
class Answer:
    question: str
    text: str
    right: bool
    ttft_s: float
    tokens: int
    decode_tok_s: Optional[float]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def ask(client: RealtimeClient, text: str, max_tokens: int) -> tuple[str, float, int, Optional[float], list[str]]:
    """One typed turn: (answer text, time to first delta s, output tokens, decode tokens/s, item ids)."""
    mark = len(client.events)
    sent = time.monotonic()
    client.ask(text, response={"max_output_tokens": max_tokens})
    done = (await client.wait_for("response.done", timeout=180, after=mark))["response"]
    deltas = client.of_type("response.output_text.delta", after=mark)
    first = client.time_of(deltas[0]) if deltas else time.monotonic()
    finished = client.time_of(client.of_type("response.done", after=mark)[0])
    answer = "".join(d["delta"] for d in deltas).strip()
    tokens = int((done.get("usage") or {}).get("output_tokens") or 0)
    rate = (tokens - 1) / (finished - first) if tokens > 1 and finished > first else None
    items = [e["item"]["id"] for e in client.of_type("conversation.item.added", after=mark) if e.get("item")]
    items += [item["id"] for item in done.get("output", []) if item.get("id") and item["id"] not in items]
    return answer, first - sent, tokens, rate, items


async def forget(client: RealtimeClient, items: list[str]) -> None:
    for item_id in items:
        mark = len(client.events)
        client.send({"type": "conversation.item.delete", "item_id": item_id})
        await client.wait_for("conversation.item.deleted", timeout=10, after=mark)


async def run_model(
    models: ModelSet, config: GatewayConfig, questions: tuple[tuple[str, str], ...], verbose: bool
) -> tuple[list[Answer], list[tuple[str, str, bool]]]:
    async with running_gateway(config, models) as (url, _app):
        client = RealtimeClient(url)
        if await client.connect(session={"type": "realtime", "output_modalities": ["text"]}) != 201:
            raise RuntimeError(f"the call was refused: {client.error_body}")
        await ask(client, "Hello.", 8)  # warm-up: the first turn reads the system prompt
        answers: list[Answer] = []
        for question, pattern in questions:
            text, ttft, tokens, rate, items = await ask(client, question, config.max_response_tokens)
            right = re.search(pattern, text, re.IGNORECASE) is not None
            answers.append(Answer(question, text, right, ttft, tokens, rate))
            if verbose:
                print(f"  {'ok ' if right else 'BAD'} {ttft:5.2f}s {question} -> {text}", flush=True)
            await forget(client, items)
        await client.hangup()

        memory: list[tuple[str, str, bool]] = []
        client = RealtimeClient(url)
        if await client.connect(session={"type": "realtime", "output_modalities": ["text"]}) != 201:
            raise RuntimeError(f"the call was refused: {client.error_body}")
        for said, pattern in MEMORY_TURNS:
            text = (await ask(client, said, config.max_response_tokens))[0]
            ok = pattern is None or re.search(pattern, text, re.IGNORECASE | re.DOTALL) is not None
            memory.append((said, text, ok))
        await client.hangup()
        return answers, memory


def report(name: str, answers: list[Answer], memory: list[tuple[str, str, bool]]) -> dict[str, str]:
    right = sum(a.right for a in answers)
    ttfts = [a.ttft_s for a in answers]
    rates = [a.decode_tok_s for a in answers if a.decode_tok_s]
    words = [len(a.text.split()) for a in answers]
    wrong = [f"{a.question} -> {a.text}" for a in answers if not a.right]
    if wrong:
        print(f"\n{name}: wrong answers")
        for line in wrong:
            print(f"  - {line}")
    print(f"\n{name}: multi-turn memory")
    for said, text, ok in memory:
        print(f"  {'ok ' if ok else 'BAD'} caller: {said}  ->  {text}")
    return {
        "model": name,
        "accuracy": f"{right}/{len(answers)} ({100 * right / len(answers):.0f}%)",
        "median words": f"{statistics.median(words):g}",
        "first token p50/p95 s": f"{percentile(ttfts, 0.5):.2f} / {percentile(ttfts, 0.95):.2f}",
        "decode tok/s (median)": f"{statistics.median(rates):.1f}" if rates else "-",
        "remembers": "yes" if all(ok for _, _, ok in memory) else "no",
    }


def print_table(rows: list[dict[str, str]]) -> None:
    keys = list(rows[0])
    print("\n| " + " | ".join(keys) + " |")
    print("|" + "|".join("---" for _ in keys) + "|")
    for row in rows:
        print("| " + " | ".join(row[k] for k in keys) + " |")


def start_spinner() -> subprocess.Popen[bytes]:
    """A niced process that keeps one core busy (the caller kills it)."""
    return subprocess.Popen(["nice", "-n", "5", sys.executable, "-c", "while 1: pass"])


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=GatewayConfig().llm_model, help="comma-separated llm_model values")
    parser.add_argument("--backend", default="llama_cpp", help="llm_backend")
    parser.add_argument("--threads", type=int, default=None, help="llm_threads")
    parser.add_argument("--batch-threads", type=int, default=None, help="llm_batch_threads")
    parser.add_argument("--busy", action="store_true", help="keep the other core busy while measuring")
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N questions")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()

    overrides: dict[str, object] = {"llm_backend": args.backend, "pool_size": 1}
    if args.threads is not None:
        overrides["llm_threads"] = args.threads
    if args.batch_threads is not None:
        overrides["llm_batch_threads"] = args.batch_threads
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    questions = QUESTIONS[: args.limit] if args.limit else QUESTIONS
    base = GatewayConfig.from_env(llm_model=names[0], **overrides)
    before = rss_mb()
    models = load_models(base)
    print(f"models loaded: peak RSS {rss_mb():.0f} MB (was {before:.0f} MB before loading)", flush=True)
    busy = start_spinner() if args.busy else None
    rows = []
    try:
        for index, name in enumerate(names):
            config = dataclasses.replace(base, llm_model=name, port=free_port())
            if index:
                models = dataclasses.replace(models, llm=load_backend("llm", config))
            print(
                f"\n== {name} ({config.llm_backend}, {config.llm_threads} decode / {config.llm_batch_threads} "
                f"prompt threads{', other core busy' if busy else ''}): {len(questions)} questions",
                flush=True,
            )
            answers, memory = await run_model(models, config, questions, args.verbose)
            rows.append(report(name, answers, memory))
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
