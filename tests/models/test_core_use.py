"""The LLM's threads by load: heavy model calls are counted while they run (a generator's items
while each is computed, not while its consumer holds it), and the batched decoder takes all cores
for a step only while none runs (real default model, shared instance)."""

from __future__ import annotations

import contextlib
import threading

import pytest

from gateway.models.base import ChatMessage, ModelSet
from gateway.models.compute import core_use
from gateway.models.compute.core_use import CORE_USE, CoreUse, LlamaThreads
from gateway.models.llama_cpp.schedule import BUSY_CHUNK


def test_heavy_calls_are_counted_while_they_run_and_on_errors_let_go() -> None:
    use = CoreUse()
    with use.heavy():
        with use.heavy():
            assert use.busy == 2
        assert use.busy == 1
    try:
        with use.heavy():
            raise RuntimeError("a failed model call")
    except RuntimeError:
        pass
    assert use.busy == 0
    use.calls = 1
    assert use.busy == 0, "a lone call: its own LLM step may take the cores"
    use.calls = 2
    assert use.busy == 1, "two calls: the other's media and VAD want a core"


def test_a_generators_items_count_while_computed_not_while_held() -> None:
    use = CoreUse()
    seen: list[int] = []

    def sentences():
        for i in range(3):
            seen.append(use.busy)  # computing item i
            yield i

    for _item in use.each_heavy(sentences()):
        assert use.busy == 0, "the consumer holds the item: nothing computes"
    assert seen == [1, 1, 1] and use.busy == 0


def test_thread_policy_by_load() -> None:
    threads = LlamaThreads(decode=1, prompt=1, several=1, idle=2)
    assert threads.for_step(1, busy=False) == (2, 2)
    assert threads.for_step(3, busy=False) == (2, 2)
    assert threads.for_step(1, busy=True) == (1, 1)
    assert threads.for_step(3, busy=True) == (1, 1)
    assert LlamaThreads(decode=1, prompt=2).for_step(1, busy=False) == (1, 2), "idle 0: no idle rule"
    assert LlamaThreads(decode=1, prompt=2, several=1).for_step(2, busy=True) == (1, 1)


def test_the_decoder_takes_both_cores_only_while_no_heavy_call_runs(models: ModelSet) -> None:
    llm = models.llm
    decoder = llm.decoder
    saved, calls = decoder.threads, CORE_USE.calls
    decoder.threads = LlamaThreads(decode=1, prompt=1, several=1, idle=2)
    CORE_USE.calls = 1  # one call connected (an earlier test's pool may have left any count)
    messages = [ChatMessage("user", "Say one word.")]
    try:
        llm.generate(messages, 2, lambda: False, lambda piece: None)
        assert decoder._threads_now == (2, 2), "nothing else ran: all cores"
        started, release = threading.Event(), threading.Event()

        def stt_call() -> None:
            with CORE_USE.heavy():
                started.set()
                release.wait(30)

        other = threading.Thread(target=stt_call)
        other.start()
        started.wait(5)
        try:
            llm.generate([ChatMessage("user", "Say another word.")], 2, lambda: False, lambda piece: None)
            assert decoder._threads_now == (1, 1), "an STT call runs: one thread"
        finally:
            release.set()
            other.join(5)
    finally:
        decoder.threads, CORE_USE.calls = saved, calls


def test_a_prompt_read_while_a_heavy_call_runs_is_cut_in_short_steps(models: ModelSet) -> None:
    """One call connected, an end-of-turn or STT call running: the turn's prompt is read
    ``BUSY_CHUNK`` tokens a step (each on one thread), so the first step after the call ends can
    take both cores; with nothing else running it is read in one step."""
    llm = models.llm
    decoder = llm.decoder
    saved, calls = decoder.threads, CORE_USE.calls
    decoder.threads = LlamaThreads(decode=1, prompt=1, several=1, idle=2)
    CORE_USE.calls = 1
    question = "Name three rivers of South America and one city on each, please, briefly."
    try:
        reads = {}
        for busy in (False, True):
            decoder.forget()
            before = decoder.steps
            with CORE_USE.heavy() if busy else contextlib.nullcontext():
                answer = llm.generate([ChatMessage("user", question)], 1, lambda: False, lambda piece: None)
            reads[busy] = (answer.prompt_tokens - answer.cached_tokens, decoder.steps - before)
        (free_tokens, free_steps), (busy_tokens, busy_steps) = reads[False], reads[True]
        assert busy_tokens == free_tokens > 2 * BUSY_CHUNK, reads
        assert free_steps <= -(-free_tokens // decoder.chunk), f"free cores: whole chunks {reads}"
        assert busy_steps >= -(-busy_tokens // BUSY_CHUNK), f"busy: {BUSY_CHUNK} tokens a step at most {reads}"
    finally:
        decoder.threads, CORE_USE.calls = saved, calls


def test_the_decoder_takes_no_step_while_a_lone_calls_first_audio_is_synthesized(
    models: ModelSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CoreUse.holds_llm``: a turn asked meanwhile waits, and goes on once the audio is made."""
    monkeypatch.setattr(core_use, "FIRST_AUDIO_HOLD_S", 60.0)  # however slow this box is
    llm = models.llm
    decoder = llm.decoder
    calls = CORE_USE.calls
    CORE_USE.calls = 1
    answered = threading.Event()

    def turn() -> None:
        llm.generate([ChatMessage("user", "Say one more word.")], 2, lambda: False, lambda piece: None)
        answered.set()

    made = threading.Event()
    try:
        CORE_USE.await_first_audio(made.is_set, lambda: True)
        before = decoder.steps
        asker = threading.Thread(target=turn)
        asker.start()
        assert not answered.wait(0.3), "no step while the first audio is awaited"
        assert decoder.steps == before
        made.set()
        assert answered.wait(30), "the turn goes on once it is made"
        asker.join(5)
    finally:
        made.set()
        CORE_USE.calls = calls
