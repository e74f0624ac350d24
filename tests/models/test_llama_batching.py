"""Continuous batching in the llama.cpp engine (real default model, shared instance): turns that run
at the same time advance in the same decode steps, and each gets the answer it would get alone.

"The same answer" is compared by words, not characters: llama.cpp's CPU kernels are not batch-invariant
(a sequence's KV cells sit elsewhere in a shared batch, so SIMD sums round differently), and a near-tie
between two tokens can flip. CI saw "Apple." alone and "Apple" batched; what a caller hears must not
change beyond such a flip."""

from __future__ import annotations

import difflib
import re
import threading
import time
from typing import Any

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage, FunctionTool, Generation, GenerationOptions, ModelSet
from gateway.models.llama_cpp.llm import LlamaCppLanguageModel
from gateway.models.llama_cpp.state_cache import common_prefix
from gateway.models.tool_decision import decision_messages

SYSTEM = ChatMessage("system", GatewayConfig().instructions)


@pytest.fixture(scope="module")
def llm(models: ModelSet) -> LlamaCppLanguageModel:
    assert isinstance(models.llm, LlamaCppLanguageModel), "the default engine is llama.cpp"
    return models.llm


def turn(question: str, history: list[ChatMessage] | None = None) -> list[ChatMessage]:
    return [SYSTEM, *(history or []), ChatMessage("user", question)]


def together(llm: Any, runs: dict[str, dict[str, Any]]) -> dict[str, Generation]:
    """Start every run (generate keyword arguments) in its own thread at once; their results."""
    results: dict[str, Generation] = {}
    start = threading.Barrier(len(runs))

    def run(name: str, kwargs: dict[str, Any]) -> None:
        start.wait()
        results[name] = llm.generate(**kwargs)

    threads = [threading.Thread(target=run, args=item) for item in runs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def plain(messages: list[ChatMessage], max_tokens: int = 24, **extra: Any) -> dict[str, Any]:
    kwargs = {"messages": messages, "max_tokens": max_tokens, "should_stop": lambda: False}
    return {"on_text": lambda piece: None, **kwargs, **extra}


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def same_answer(batched: str, alone: str) -> bool:
    """True when two greedy answers say the same words (punctuation and case aside), up to a late
    near-tie flip: a word-sequence similarity of at least 0.8."""
    return difflib.SequenceMatcher(None, words(batched), words(alone)).ratio() >= 0.8


def test_same_answer_tells_a_flipped_full_stop_from_another_answer() -> None:
    assert same_answer("Apple", "Apple.")
    assert same_answer(
        "One, two, three, four, five, six, seven, eight, nine",
        "One, two, three, four, five, six, seven, eight, nine, ten.",
    )
    assert not same_answer("Banana.", "Apple.")
    assert not same_answer("The capital of France is Lyon, a city.", "The capital of France is Paris.")


def test_concurrent_greedy_turns_give_what_each_gives_alone_in_shared_steps(llm: LlamaCppLanguageModel) -> None:
    questions = {
        "france": "What is the capital of France?",
        "fruit": "Name one fruit.",
        "count": "Count from one to ten, in words.",
    }
    alone = {name: llm.generate(**plain(turn(q))).text for name, q in questions.items()}
    steps_before = len(llm.decoder.step_sizes)
    both = together(llm, {name: plain(turn(q)) for name, q in questions.items()})
    assert set(both) == set(alone), both
    differing = {
        name: (both[name].text, alone[name]) for name in alone if not same_answer(both[name].text, alone[name])
    }
    assert not differing, f"batched turns answered otherwise than alone: {differing}"
    assert "paris" in words(both["france"].text) and "ten" in words(both["count"].text), both
    shared = llm.decoder.step_sizes[steps_before:]
    assert max(shared) >= 2, f"the turns never shared a decode step: {shared}"


def test_cancelling_one_sequence_leaves_the_other_running(llm: LlamaCppLanguageModel) -> None:
    alone = llm.generate(**plain(turn("Count from one to ten, in words."))).text
    stop = threading.Event()
    pieces: list[str] = []

    def cancel_after_first(piece: str) -> None:
        pieces.append(piece)
        stop.set()

    runs = {
        "cancelled": plain(turn("Tell me a long story about a dragon."), 200, on_text=cancel_after_first),
        "kept": plain(turn("Count from one to ten, in words.")),
    }
    runs["cancelled"]["should_stop"] = stop.is_set
    results = together(llm, runs)
    assert results["cancelled"].finish_reason == "cancelled" and len(pieces) == 1, results["cancelled"]
    assert results["kept"].finish_reason == "stop" and same_answer(results["kept"].text, alone), (
        results["kept"],
        alone,
    )


def test_no_caller_hears_another_callers_context(llm: LlamaCppLanguageModel) -> None:
    """Ada's session tells the model her name and city; Bob's session, at the same time and after,
    asks for its own: it must not get Ada's (KV cells are shared only for identical token prefixes)."""
    ada = [ChatMessage("user", "My name is Ada and I live in Lisbon."), ChatMessage("assistant", "Hello Ada!")]
    bob = [ChatMessage("user", "My name is Bob and I live in Oslo."), ChatMessage("assistant", "Hello Bob!")]
    results = together(
        llm,
        {
            "ada": plain(turn("Which city do I live in?", ada)),
            "bob": plain(turn("Which city do I live in?", bob)),
            "stranger": plain(turn("Which city do I live in? Answer with a city name or 'unknown'.")),
        },
    )
    assert "lisbon" in results["ada"].text.lower() and "oslo" not in results["ada"].text.lower(), results
    assert "oslo" in results["bob"].text.lower() and "lisbon" not in results["bob"].text.lower(), results
    stranger = results["stranger"].text.lower()
    assert "lisbon" not in stranger and "oslo" not in stranger, results


# Two sessions' prompts read and two turns generated (~25 s on a busy 2-core box); the read-ahead of
# one session's prompt stays in the default run (tests/server/test_startup_prompt.py).
@pytest.mark.slow
def test_prepared_instructions_and_tools_are_read_before_the_first_turn(llm: LlamaCppLanguageModel) -> None:
    weather = FunctionTool(
        "get_weather",
        "Current weather in a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    options = GenerationOptions(tools=[weather])
    system = ChatMessage("system", "You are a weather line. Call get_weather for any weather question. " * 3)
    # Under "auto" a reply in words is read after the instructions alone, the call decision after
    # the tools' listing: both are read ahead.
    prefix = llm.chat.prefix_tokens([system], GenerationOptions())
    listing = llm.chat.prefix_tokens(decision_messages([system], [weather]), GenerationOptions())
    assert len(prefix) > 40 and "get_weather" in llm._llm.detokenize(listing).decode()
    warm = llm.prepare([system], options)
    deadline = time.monotonic() + 120
    while warm is not None and not warm.done and time.monotonic() < deadline:
        time.sleep(0.05)
    held = [list(llm.decoder.held(seq)) for seq in range(len(llm.decoder._seqs))]
    assert any(common_prefix(np.asarray(h), np.asarray(listing)) >= len(listing) - 1 for h in held), "tools read"
    first = llm.generate(**plain([system, ChatMessage("user", "Hello there!")], 8, options=options))
    assert first.cached_tokens >= len(prefix) - 1, (first, len(prefix))
    other = llm.generate(**plain([system, ChatMessage("user", "Good morning!")], 8, options=options))
    assert other.cached_tokens >= len(prefix) - 1, "a second session with the same instructions shares the prefix"


def pending_warms(llm: LlamaCppLanguageModel) -> int:
    """Background warms the decoder still has to read (its pending evaluations on no turn's sequence)."""
    decoder = llm.decoder
    with decoder._cond:
        return sum(1 for e in decoder._live_pending() if e.warm)


def test_a_warm_nobody_holds_stops_reading(llm: LlamaCppLanguageModel) -> None:
    """A session's instructions were read on after the session ended: a caller who connected with
    ~900 tokens of instructions and hung up at once held every other caller's decode steps for
    30 s on a slow box (a later test's 8-token reply took 25 s instead of 7). The warm is now the
    session's to let go: the last holder's cancel stops it at the next step."""
    system = ChatMessage("system", "Remember these words: " + " ".join(f"alpha{i} beta{i}" for i in range(150)))
    prefix = llm.chat.prefix_tokens([system], GenerationOptions())
    assert 600 < len(prefix) <= 1024, len(prefix)  # read ahead (not over the warm limit), and seconds of work
    first = llm.prepare([system])
    second = llm.prepare([system])  # a second session with the same instructions shares the warm
    assert first is not None and second is not None
    first.cancel()
    first.cancel()  # idempotent: one session's two cancels do not let go of the other's hold
    assert not second.done, "still held by the second session"
    second.cancel()
    deadline = time.monotonic() + 30
    while pending_warms(llm) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pending_warms(llm) == 0, "the warm stopped once nobody held it"
    held = max(
        common_prefix(np.asarray(s.tokens, dtype=np.intc), np.asarray(prefix, dtype=np.intc)) for s in llm.decoder._seqs
    )
    assert held < len(prefix) - 1, "it stopped before reading all of it"


def test_two_warms_sharing_a_prefix_do_not_wait_on_each_other(llm: LlamaCppLanguageModel) -> None:
    """Two sessions whose instructions share a long opening (a persona, then their own tools or
    rules) asked to be warmed in the same moment: each unread warm waited for the other, neither
    was ever read, and the step thread spun. A turn waits only for a warm being read now."""
    persona = "You are Ada, the booking line of the Lisbon harbour ferries. " * 6
    first = [ChatMessage("system", persona + "Answer about timetables.")]
    second = [ChatMessage("system", persona + "Answer about ticket prices.")]
    decoder = llm.decoder
    with decoder._cond:  # both queued before the step thread looks at either
        warms = [llm.prepare(first), llm.prepare(second)]
    assert all(warm is not None for warm in warms)
    deadline = time.monotonic() + 90
    while not all(w.done for w in warms if w is not None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(w.done for w in warms if w is not None), "both warms were read"
    for warm in warms:
        assert warm is not None
        warm.cancel()
    prefix = llm.chat.prefix_tokens(second, GenerationOptions())
    held = max(
        common_prefix(np.asarray(s.tokens, dtype=np.intc), np.asarray(prefix, dtype=np.intc)) for s in decoder._seqs
    )
    assert held >= len(prefix) - 1
