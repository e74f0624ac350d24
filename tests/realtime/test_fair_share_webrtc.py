"""One caller must not starve the others (real model, real WebRTC, two calls on a pool of 2).

The abuser sends 100 kB of instructions (refused: over the limit), then instructions just under the
limit and a long conversation of long items, asks for a response and cancels it, then asks for
another and lets it run. Meanwhile the other caller asks simple questions: each is answered
correctly, while the abuse goes on (an ordering, not a time: how long it takes beside an abuser is
printed, and measured by scripts/bench_*). The abuser's cancel frees the engine before the
other caller's answer is done, and its session stays usable.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from gateway.client import RealtimeClient
from gateway.models.base import Generation
from gateway.realtime.limits import SessionLimits
from tests.helpers import serve

LIMITS = SessionLimits()
WORDS = (
    "apple river stone cloud seven orange quietly mountain paper lantern window thunder copper violin "
    "meadow silver engine garden harbor pencil rocket saddle tunnel velvet walnut yellow zebra anchor"
).split()


def filler(chars: int, seed: int) -> str:
    """Varied words (so they cost the model real tokens), ``chars`` characters long."""
    rng = random.Random(seed)
    text = ""
    while len(text) < chars:
        text += rng.choice(WORDS) + " "
    return text[:chars]


async def timed_answer(client: RealtimeClient, question: str) -> tuple[float, dict, float]:
    """Seconds from sending a typed question to its response.done, that response, and when
    (time.monotonic()) the response.done arrived; then waits until the answer has been heard to
    its end (a question asked over it would cut it short)."""
    started = time.monotonic()
    mark = client.ask(question)
    event = await client.wait_for("response.done", timeout=60, after=mark)
    done_at = client.time_of(event)
    await client.wait_for("output_audio_buffer.stopped", timeout=30, after=mark)
    return done_at - started, event["response"], done_at


def transcript(response: dict) -> str:
    part = response["output"][0]["content"][0]
    return (part.get("transcript") or part.get("text") or "").lower()


class EngineLog:
    """Wraps the shared engine's ``generate`` (the real one runs) to note when each generation
    ended and why: (end time.monotonic(), Generation), in the order they ended."""

    def __init__(self, llm: Any) -> None:
        self.ended: list[tuple[float, Generation]] = []
        self._generate = llm.generate

    def generate(self, *args: Any, **kwargs: Any) -> Generation:
        result = self._generate(*args, **kwargs)
        self.ended.append((time.monotonic(), result))
        return result


@pytest.mark.slow
async def test_an_abusive_caller_does_not_starve_a_simple_question(models, gateway_config, monkeypatch):
    engine = EngineLog(models.llm)
    monkeypatch.setattr(models.llm, "generate", engine.generate)
    async with serve(gateway_config(pool_size=2), models) as (url, _app):
        victim = RealtimeClient(url)
        assert await victim.connect(session={"type": "realtime", "max_output_tokens": 40}) == 201
        alone_s, alone, _ = await timed_answer(victim, "What is the capital of France?")
        assert alone["status"] == "completed" and "paris" in transcript(alone), alone

        abuser = RealtimeClient(url)
        assert await abuser.connect() == 201
        mark = len(abuser.events)
        abuser.send({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief. " * 10_000}})
        error = (await abuser.wait_for("error", timeout=10, after=mark))["error"]
        assert (error["code"], error["param"]) == ("string_above_max_length", "session.instructions")
        huge = filler(LIMITS.max_instructions_chars - 10, seed=1)
        abuser.send(
            {
                "type": "session.update",
                "session": {"type": "realtime", "instructions": huge, "output_modalities": ["text"]},
            }
        )
        await abuser.wait_for("session.updated", timeout=10, after=mark)
        for n in range(12):
            role, kind = ("user", "input_text") if n % 2 == 0 else ("assistant", "output_text")
            item = {"type": "message", "role": role, "content": [{"type": kind, "text": filler(8_000, seed=10 + n)}]}
            abuser.send({"type": "conversation.item.create", "item": item})
        await abuser.wait_for("conversation.item.done", timeout=10, count=12, after=mark)

        # Abuse 1: a huge prompt, cancelled while it is being read.
        mark = len(abuser.events)
        abuser.send({"type": "response.create"})
        await abuser.wait_for("response.created", timeout=10, after=mark)
        await asyncio.sleep(1.0)  # the abuser's prompt holds the engine
        question = asyncio.ensure_future(timed_answer(victim, "What is the capital of Italy?"))
        await asyncio.sleep(1.0)
        cancelled_at = time.monotonic()
        abuser.send({"type": "response.cancel"})
        done = (await abuser.wait_for("response.done", timeout=10, after=mark))["response"]
        cancel_s = time.monotonic() - cancelled_at
        assert done["status"] == "cancelled"
        contended_s, answer, contended_done_at = await question
        assert answer["status"] == "completed" and "rome" in transcript(answer), answer
        stopped = [(at, g) for at, g in engine.ended if g.finish_reason == "cancelled" and at > cancelled_at]
        assert stopped, "the abuser's generation ended as cancelled"
        engine_stop_s = stopped[0][0] - cancelled_at
        abuser_prompt = stopped[0][1].prompt_tokens

        # Abuse 2: the same prompt, not cancelled: the compute budget and fair turns bound it.
        mark = len(abuser.events)
        abuser.send({"type": "response.create"})
        await abuser.wait_for("response.created", timeout=10, after=mark)
        await asyncio.sleep(1.0)
        budget_s, second, second_done_at = await timed_answer(victim, "What is the capital of Spain?")
        assert second["status"] == "completed" and "madrid" in transcript(second), second
        abused_event = await abuser.wait_for("response.done", timeout=60, after=mark)
        abused, abuser_done_at = abused_event["response"], abuser.time_of(abused_event)
        assert abused["status"] in ("completed", "incomplete"), abused

        print(
            f"\nalone {alone_s:.1f} s; beside an abuser ({abuser_prompt} prompt tokens): {contended_s:.1f} s "
            f"(cancelled), {budget_s:.1f} s (running); the abuser's cancel: response.done in {cancel_s:.2f} s, "
            f"engine free in {engine_stop_s:.2f} s; the running abuse ended {abused['status']}"
        )
        # Orderings: the cancelled generation left the engine before the victim's answer was done;
        # the victim was answered while the abuser's running response still held its turns.
        assert stopped[0][0] < contended_done_at, (engine_stop_s, contended_s)
        assert second_done_at < abuser_done_at, (budget_s, abused["status"])
        # Bounds ten times the old 1.0 s / 1.5 s (measured here: 0.00 s and 0.01 s).
        assert cancel_s < 10 * 1.0 and engine_stop_s < 10 * 1.5, (cancel_s, engine_stop_s)
        mark = len(abuser.events)
        abuser.send({"type": "input_audio_buffer.clear"})
        await abuser.wait_for("input_audio_buffer.cleared", timeout=5, after=mark)
        await abuser.hangup()
        await victim.hangup()
