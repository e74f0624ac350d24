"""The LLM's threads by load: heavy model calls are counted while they run (a generator's items
while each is computed, not while its consumer holds it), and the batched decoder takes all cores
for a step only while none runs (real default model, shared instance)."""

from __future__ import annotations

import threading

from gateway.models.base import ChatMessage, ModelSet
from gateway.models.compute.core_use import CORE_USE, CoreUse, LlamaThreads


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
