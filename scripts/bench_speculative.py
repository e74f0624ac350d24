#!/usr/bin/env python3
"""Speculative decoding on this CPU: would drafting with a small model (or prompt lookup) raise tokens/s?

    PYTHONPATH=. .venv/bin/python scripts/bench_speculative.py --draft /path/qwen2.5-coder-0.5b.gguf \
        [--phase cost|accept|e2e|all] [--questions 12] [--tokens 60]

A measurement, no product change. Greedy throughout, llama-cpp-python's low-level API (a context of
its own per model, ``llama_batch`` / ``llama_decode``, logits for every position of a step):

- ``cost``: ms of one target step of k tokens (logits for all k) after a ~200-token prompt, for one
  sequence and for three batched (3 x k tokens), on 1 and 2 threads; and the draft's ms per token
  (one sequence and three), alone and right after a target step (both models in one process).
- ``accept``: the target's greedy reply (up to ``--tokens``) to questions answered in words
  (``scripts/tool_questions.py``: the tuning split; the gateway's default instructions rendered by
  ``ChatFormat`` as a turn is), and at every position how many of the draft's next greedy tokens
  match; likewise for prompt lookup (the tokens after the last earlier occurrence of the last 3, 2 or
  1 tokens of prompt + reply: no model). Then, with the step costs, the expected tokens/s of each k
  for one caller and three batched against plain decoding (replayed cycle by cycle, exact for greedy).
- ``e2e``: a plain speculative loop for one caller at ``--k`` on held-out questions (the bench split),
  its output asserted identical to plain greedy, both timed.

Times need the CPU to themselves (``flock -x /work/cpu.lock``); ``accept`` alone does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np
from tool_questions import BENCH, TUNING, TUNING_FIFTH, TUNING_HARD

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage, GenerationOptions
from gateway.models.llama_cpp.chat_format import ChatFormat
from gateway.models.llama_cpp.llm import resolve_gguf

SIZES = (1, 2, 3, 4, 5, 6, 7, 8)  # target step sizes (a draft of k is verified by a step of k + 1)
DRAFT_KS = (1, 2, 3, 4, 5, 6)
FILLER = " The train leaves at half past nine from platform four, so we should be there early enough."


class Context:
    """One llama.cpp context on ``llm`` (a ``llama_cpp.Llama``) with ``seqs`` KV sequences."""

    def __init__(self, llm: Any, seqs: int = 3, n_ctx: int = 2048) -> None:
        import llama_cpp

        self._lib = llama_cpp
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, 512, 512
        params.n_seq_max, params.kv_unified, params.no_perf = seqs, True, True
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = llama_cpp.llama_batch_init(512, 0, 1)
        self.n_vocab = int(llm.n_vocab())
        self.held = [0] * seqs  # tokens each sequence holds (positions 0..held-1)

    def threads(self, n: int) -> None:
        self._lib.llama_set_n_threads(self.ctx, n, n)

    def step(self, parts: list[tuple[int, list[int]]], every: bool = True) -> tuple[list[list[int]], float]:
        """Append ``tokens`` to each ``(seq, tokens)`` in one ``llama_decode``; the greedy pick after
        every position (``every``) or after the last, and the seconds the decode took."""
        b, n = self.batch, 0
        for seq, tokens in parts:
            for i, token in enumerate(tokens):
                b.token[n], b.pos[n], b.n_seq_id[n], b.seq_id[n][0] = token, self.held[seq] + i, 1, seq
                b.logits[n] = 1 if every or i == len(tokens) - 1 else 0
                n += 1
            self.held[seq] += len(tokens)
        b.n_tokens = n
        started = time.perf_counter()
        status = self._lib.llama_decode(self.ctx, b)
        took = time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"llama_decode failed ({status})")
        picks, n = [], 0
        for _, tokens in parts:
            row = []
            for i in range(len(tokens)):
                if every or i == len(tokens) - 1:
                    logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self.ctx, n), shape=(self.n_vocab,))
                    row.append(int(logits.argmax()))
                n += 1
            picks.append(row)
        return picks, took

    def copy(self, source: int, seq: int) -> None:
        """Make ``seq`` hold what ``source`` holds (cell references: no compute)."""
        self.rewind(seq, 0)
        self._lib.llama_memory_seq_cp(self.memory, source, seq, 0, -1)
        self.held[seq] = self.held[source]

    def rewind(self, seq: int, keep: int) -> None:
        """Keep the first ``keep`` tokens of ``seq``."""
        self._lib.llama_memory_seq_rm(self.memory, seq, keep, -1)
        self.held[seq] = keep

    def read(self, seq: int, tokens: list[int]) -> int:
        """Hold exactly ``tokens`` in ``seq`` (from empty); the greedy next token."""
        self.rewind(seq, 0)
        pick = -1
        for start in range(0, len(tokens), 512):
            pick = self.step([(seq, tokens[start : start + 512])], every=False)[0][0][-1]
        return pick


def load(path: Path) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(path), n_ctx=64, n_batch=64, n_threads=1, verbose=False)


def prompts(chat: ChatFormat, split: list[Any], count: int) -> list[list[int]]:
    """Prompt tokens of the first ``count`` questions of ``split`` answered in words, as a turn reads them."""
    system = ChatMessage("system", GatewayConfig().instructions)
    asked = [q.prompt for q in split if q.tool is None][:count]
    return [chat.prompt_tokens([system, ChatMessage("user", q)], 60, GenerationOptions()) for q in asked]


def median_ms(run: Callable[[], float], reps: int) -> float:
    run()  # warm
    return statistics.median(run() for _ in range(reps)) * 1000


def step_costs(ctx: Context, prompt: list[int], seqs: int, reps: int) -> dict[int, float]:
    """Median ms of one step of k tokens per sequence, ``seqs`` sequences after ``prompt``."""
    ctx.read(0, prompt)
    for seq in range(1, seqs):
        ctx.copy(0, seq)
    tokens = prompt[-8:]  # real text tokens; their values do not change the cost

    def once(k: int) -> float:
        took = ctx.step([(s, tokens[:k]) for s in range(seqs)])[1]
        for s in range(seqs):
            ctx.rewind(s, len(prompt))
        return took

    return {k: median_ms(lambda k=k: once(k), reps) for k in SIZES}


def draft_cost(draft: Context, prompt: list[int], seqs: int, reps: int, target: Any = None) -> float:
    """Median ms of one draft token (``seqs`` sequences at once), alone or right after a target step
    (``target``: a (Context, prompt) whose one-token step runs, untimed, before each draft step)."""
    draft.read(0, prompt)
    for seq in range(1, seqs):
        draft.copy(0, seq)
    if target is not None:
        target[0].read(0, target[1])

    def once() -> float:
        if target is not None:
            target[0].step([(0, target[1][-1:])])
            target[0].rewind(0, len(target[1]))
        took = draft.step([(s, prompt[-1:]) for s in range(seqs)])[1]
        for s in range(seqs):
            draft.rewind(s, len(prompt))
        return took

    return median_ms(once, reps)


def greedy(ctx: Context, prompt: list[int], limit: int, eog: Callable[[int], bool]) -> tuple[list[int], float]:
    """The target's greedy reply (ending with its end token when reached) and its decode seconds."""
    pick, reply, spent = ctx.read(0, prompt), [], 0.0
    while True:
        reply.append(pick)
        if eog(pick) or len(reply) >= limit:
            return reply, spent
        picks, took = ctx.step([(0, [pick])])
        pick, spent = picks[0][0], spent + took


def draft_runs(draft: Context, prompt: list[int], reply: list[int], kmax: int) -> list[int]:
    """For each reply position i: how many of the draft's greedy tokens after prompt + reply[:i]
    match reply[i:] (up to ``kmax``)."""
    nxt, runs = draft.read(0, prompt), []
    for i in range(len(reply)):
        base, run, pick, nxt_after = len(prompt) + i, 0, nxt, -1
        while run < kmax and i + run < len(reply) and pick == reply[i + run]:
            run += 1
            pick = draft.step([(0, [reply[i + run - 1]])])[0][0][0]
            if run == 1:
                nxt_after = pick  # the draft's pick after reply[:i + 1]
        runs.append(run)
        if run == 0:
            draft.rewind(0, base)
            nxt = draft.step([(0, [reply[i]])])[0][0][0]
        else:
            draft.rewind(0, base + 1)
            nxt = nxt_after
    return runs


def lookup(context: list[int], kmax: int) -> list[int]:
    """Prompt lookup: the tokens after the last earlier occurrence of the last 3 (else 2, 1) tokens."""
    for n in (3, 2, 1):
        if len(context) <= n:
            continue
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start : start + n] == tail:
                return context[start + n : start + n + kmax]
    return []


def replay(reply: list[int], proposal: Callable[[int], list[int]], k: int) -> list[tuple[int, int, int]]:
    """Speculative cycles over ``reply``: (tokens proposed, accepted, emitted) per cycle, greedy."""
    i, cycles = 0, []
    while i < len(reply):
        proposed = proposal(i)[:k]
        accepted = 0
        while accepted < len(proposed) and i + accepted < len(reply) and proposed[accepted] == reply[i + accepted]:
            accepted += 1
        emitted = min(accepted + 1, len(reply) - i)
        cycles.append((len(proposed), accepted, emitted))
        i += emitted
    return cycles


def accept_phase(args: Any, target: Context, draft: Context, chat: ChatFormat, eog: Callable[[int], bool]) -> dict:
    kmax = max(DRAFT_KS)
    split = [*TUNING, *TUNING_HARD, *TUNING_FIFTH]
    found: dict[str, Any] = {"draft": {k: [] for k in DRAFT_KS}, "lookup": {k: [] for k in DRAFT_KS}, "runs": []}
    for prompt in prompts(chat, split, args.questions):
        reply, _ = greedy(target, prompt, args.tokens, eog)
        runs = draft_runs(draft, prompt, reply, kmax)
        found["runs"].extend(runs)
        for k in DRAFT_KS:
            found["draft"][k].extend(replay(reply, lambda i, r=reply, runs=runs: [*r[i : i + runs[i]], -1], k))
            found["lookup"][k].extend(replay(reply, lambda i, p=prompt, r=reply: lookup(p + r[:i], kmax), k))
    runs = found["runs"]
    print(f"\n{args.questions} tuning questions, {len(runs)} reply tokens (greedy 1.5B, up to {args.tokens} each)\n")
    print("| draft | " + " | ".join(f"P(run >= {j})" for j in range(1, kmax + 1)) + " | mean run (k=6) |")
    print("|---|" + "---|" * (kmax + 1))
    share = [sum(r >= j for r in runs) / len(runs) for j in range(1, kmax + 1)]
    print("| 0.5B | " + " | ".join(f"{s:.2f}" for s in share) + f" | {statistics.mean(runs):.2f} |")
    print("\n| source | k | tokens per cycle | cycles with a proposal | proposed tokens accepted |")
    print("|---|---|---|---|---|")
    for source in ("draft", "lookup"):
        for k in DRAFT_KS:
            cycles = found[source][k]
            per = sum(e for _, _, e in cycles) / len(cycles)
            proposed, accepted = sum(p for p, _, _ in cycles), sum(a for _, a, _ in cycles)
            with_p = sum(1 for p, _, _ in cycles if p) / len(cycles)
            print(f"| {source} | {k} | {per:.2f} | {with_p:.2f} | {accepted / max(1, proposed):.2f} |")
    return found


def expected(found: dict, costs: dict) -> None:
    """Tokens/s of plain decoding and of each speculative k, from the acceptance and the step costs."""
    for threads in sorted({key[2] for key in costs}):
        v1, v3 = costs[("target", 1, threads)], costs[("target", 3, threads)]
        d1, d3 = costs[("draft-after", 1, threads)], costs[("draft-after", 3, threads)]
        plain1, plain3 = 1000 / v1[1], 3000 / v3[1]
        print(f"\n{threads} thread(s): plain {plain1:.1f} tok/s for 1 caller, {plain3:.1f} aggregate for 3 batched")
        print(f"(target step ms by size, 1 seq: {fmt(v1)}; 3 seqs: {fmt(v3)}; draft token {d1:.1f} / {d3:.1f} ms)\n")
        print("| source | k | 1 caller tok/s | gain | 3 callers tok/s | gain |")
        print("|---|---|---|---|---|---|")
        for source in ("draft", "lookup"):
            for k in DRAFT_KS:
                cycles = found[source][k]
                emitted = sum(e for _, _, e in cycles)
                if source == "draft":
                    ms1 = sum(k * d1 + v1[k + 1] for _ in cycles)
                    ms3 = sum(k * d3 + v3[k + 1] for _ in cycles)
                else:  # proposals vary in length; the 3-caller step is taken at its longest (upper bound)
                    ms1 = sum(v1[p + 1] for p, _, _ in cycles)
                    ms3 = sum(v3[k + 1] if p else v3[1] for p, _, _ in cycles)
                r1, r3 = emitted * 1000 / ms1, 3 * emitted * 1000 / ms3
                print(f"| {source} | {k} | {r1:.1f} | {r1 / plain1:.2f}x | {r3:.1f} | {r3 / plain3:.2f}x |")


def fmt(sizes: dict[int, float]) -> str:
    return ", ".join(f"{k}: {ms:.0f}" for k, ms in sizes.items())


def cost_phase(args: Any, target: Context, draft: Context, chat: ChatFormat) -> dict:
    prompt = prompts(chat, BENCH, 1)[0]
    prompt = prompt + chat.tokenize(FILLER * 6)[: max(0, 200 - len(prompt))]  # ~200 tokens in KV
    costs: dict = {}
    for threads in args.threads:
        target.threads(threads)
        draft.threads(threads)
        for seqs in (1, 3):
            costs[("target", seqs, threads)] = step_costs(target, prompt, seqs, args.reps)
            costs[("draft", seqs, threads)] = draft_cost(draft, prompt, seqs, args.reps)
            costs[("draft-after", seqs, threads)] = draft_cost(draft, prompt, seqs, args.reps, (target, prompt))
    print(f"\ntarget step ms after {len(prompt)} prompt tokens (median of {args.reps}), logits for every position\n")
    print("| threads | sequences | " + " | ".join(f"k={k}" for k in SIZES) + " | plain tok/s |")
    print("|---|---|" + "---|" * (len(SIZES) + 1))
    for (name, seqs, threads), row in costs.items():
        if name == "target":
            ks = " | ".join(f"{row[k]:.0f}" for k in SIZES)
            print(f"| {threads} | {seqs} | {ks} | {seqs * 1000 / row[1]:.1f} |")
    print("\n| threads | draft sequences | ms per draft token, alone | after a target step |")
    print("|---|---|---|---|")
    for threads in args.threads:
        for seqs in (1, 3):
            alone, after = costs[("draft", seqs, threads)], costs[("draft-after", seqs, threads)]
            print(f"| {threads} | {seqs} | {alone:.1f} | {after:.1f} |")
    return costs


def e2e_phase(args: Any, target: Context, draft: Context, chat: ChatFormat, eog: Callable[[int], bool]) -> None:
    k = args.k
    print(f"\nend to end, 1 caller, k={k}, held-out questions (bench split), greedy, decode time after the prompt\n")
    print("| threads | source | tokens | plain tok/s | speculative tok/s | gain | identical |")
    print("|---|---|---|---|---|---|---|")
    asked = prompts(chat, BENCH, args.questions)
    for threads in args.threads:
        target.threads(threads)
        draft.threads(threads)
        for source in ("draft", "lookup"):
            plain_s = spec_s = 0.0
            tokens = 0
            for prompt in asked:
                plain, took = greedy(target, prompt, args.tokens, eog)
                spec, spent = speculate(target, draft if source == "draft" else None, prompt, args.tokens, k, eog)
                assert spec == plain, f"speculative output differs from greedy: {spec} != {plain}"
                plain_s, spec_s, tokens = plain_s + took, spec_s + spent, tokens + len(plain) - 1
            p, s = tokens / plain_s, tokens / spec_s
            print(f"| {threads} | {source} | {tokens} | {p:.1f} | {s:.1f} | {s / p:.2f}x | yes |")


def speculate(
    target: Context, draft: Optional[Context], prompt: list[int], limit: int, k: int, eog: Callable[[int], bool]
) -> tuple[list[int], float]:
    """One caller's greedy reply by speculative decoding (draft model, or prompt lookup when
    ``draft`` is None) and the seconds after the prompt: the draft proposes k tokens, one target
    step over the last token and the k checks them, the matching ones and the target's next are kept."""
    reply = [target.read(0, prompt)]
    if draft is not None:
        draft.read(0, prompt)
    started = time.perf_counter()
    while not eog(reply[-1]) and len(reply) < limit:
        if draft is not None:
            pending, proposed = reply[draft.held[0] - len(prompt) :], []
            for _ in range(k):
                pick = draft.step([(0, pending)], every=False)[0][0][-1]
                proposed.append(pick)
                pending = [pick]
                if eog(pick):
                    break
        else:
            proposed = lookup(prompt + reply, k)
        checks = target.step([(0, [reply[-1], *proposed])])[0][0]
        accepted = 0
        while accepted < len(proposed) and proposed[accepted] == checks[accepted]:
            accepted += 1
        target.rewind(0, len(prompt) + len(reply) + accepted)
        if draft is not None:
            draft.rewind(0, min(draft.held[0], len(prompt) + len(reply) + accepted))
        reply += [*proposed[:accepted], checks[accepted]]
        if any(eog(t) for t in reply[-accepted - 1 :]):
            break
    spent = time.perf_counter() - started
    reply = reply[:limit]
    for i, token in enumerate(reply):
        if eog(token):
            return reply[: i + 1], spent
    return reply, spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=GatewayConfig().llm_model, help="target: bundled name or .gguf")
    parser.add_argument("--draft", required=True, help="draft .gguf (or bundled name, joined into the cache)")
    parser.add_argument("--phase", choices=("cost", "accept", "e2e", "all"), default="all")
    parser.add_argument("--threads", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2])
    parser.add_argument("--reps", type=int, default=5, help="timed repetitions per step cost")
    parser.add_argument("--questions", type=int, default=12, help="questions per split (bounded runtime)")
    parser.add_argument("--tokens", type=int, default=60, help="reply tokens per question")
    parser.add_argument("--k", type=int, default=3, help="draft length of the end-to-end check")
    parser.add_argument("--accepted", type=Path, help="acceptance JSON: written by accept, read by cost")
    args = parser.parse_args()
    cache = Path(GatewayConfig().model_cache_dir)
    started = time.monotonic()
    target_llm, draft_llm = load(resolve_gguf(args.model, cache)), load(resolve_gguf(args.draft, cache))
    if target_llm.n_vocab() != draft_llm.n_vocab():
        raise SystemExit("the draft's vocabulary differs from the target's")
    chat = ChatFormat(target_llm, 2048)
    target, draft = Context(target_llm), Context(draft_llm)
    eog = chat.is_eog
    print(f"target {args.model}, draft {args.draft}, threads {args.threads}")
    costs = cost_phase(args, target, draft, chat) if args.phase in ("cost", "all") else None
    found = None
    if args.phase in ("accept", "all"):
        target.threads(max(args.threads))
        draft.threads(max(args.threads))
        found = accept_phase(args, target, draft, chat, eog)
        if args.accepted:
            args.accepted.write_text(json.dumps({s: found[s] for s in ("draft", "lookup")}))
    elif costs is not None and args.accepted:
        found = {s: {int(k): v for k, v in c.items()} for s, c in json.loads(args.accepted.read_text()).items()}
    if costs is not None and found is not None:
        expected(found, costs)
    if args.phase in ("e2e", "all"):
        e2e_phase(args, target, draft, chat, eog)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
