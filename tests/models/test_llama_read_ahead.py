"""Reading a reply's prompt ahead (real default model, shared instance): at the caller's pause the
engine reads the prompt the turn would get; a turn asking for exactly that reads one token, and a
turn asking for something else (the caller went on) gets the answer it would get without it."""

from __future__ import annotations

import threading
import time

import pytest

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage, ModelSet
from gateway.models.llama_cpp.llm import LlamaCppLanguageModel
from tests.models.test_llama_batching import plain, same_answer

SYSTEM = ChatMessage("system", GatewayConfig().instructions)
HISTORY = [
    ChatMessage("user", "I am planning a trip to the Baltic coast next week."),
    ChatMessage("assistant", "That sounds lovely. How can I help with your trip?"),
]


@pytest.fixture(scope="module")
def llm(models: ModelSet) -> LlamaCppLanguageModel:
    assert isinstance(models.llm, LlamaCppLanguageModel), "the default engine is llama.cpp"
    return models.llm


def conversation(question: str) -> list[ChatMessage]:
    return [SYSTEM, *HISTORY, ChatMessage("user", question)]


@pytest.mark.slow  # tens of seconds of model turns
def test_a_turn_whose_prompt_was_read_ahead_reads_one_token_and_answers_the_same(llm) -> None:
    messages = conversation("Which city on the Baltic coast has the oldest harbour?")
    llm.decoder.forget()
    alone = llm.generate(**plain(messages, 16))
    assert alone.cached_tokens < alone.prompt_tokens - 8, "nothing of this turn was held before"
    llm.decoder.forget()
    warm = llm.read_ahead(messages, 16)
    assert warm is not None
    # The turn comes at once (the read is not done yet): it waits for the read, not reading twice.
    read = llm.generate(**plain(messages, 16))
    assert read.cached_tokens == read.prompt_tokens - 1, (read.cached_tokens, read.prompt_tokens)
    assert same_answer(read.text, alone.text), (read.text, alone.text)
    warm.cancel()


@pytest.mark.slow  # tens of seconds of model turns
def test_a_read_ahead_the_caller_talked_past_changes_nothing_said(llm) -> None:
    """The caller paused after "What should I pack", then went on: the turn's prompt differs from
    the one read ahead after its first words, and the answer is the one it gets without it."""
    said = conversation("What should I pack for a rainy week by the sea? Answer in one short sentence.")
    llm.decoder.forget()
    alone = llm.generate(**plain(said, 20))
    llm.decoder.forget()
    warm = llm.read_ahead(conversation("What should I pack"), 20)
    assert warm is not None
    deadline = time.monotonic() + 60
    while not warm.done and time.monotonic() < deadline:
        time.sleep(0.05)
    assert warm.done
    turn = llm.generate(**plain(said, 20))
    assert turn.cached_tokens < turn.prompt_tokens - 8, "only the words both prompts share were reused"
    assert same_answer(turn.text, alone.text), (turn.text, alone.text)
    warm.cancel()


@pytest.mark.slow  # tens of seconds of model turns
def test_a_full_kv_cache_drops_the_read_ahead_not_the_turn(llm) -> None:
    """A read-ahead (or instructions warm) still being read when the KV cache runs out of cells gave
    the turn in the same step an error (``llm_failed``); the background read now gives way. (It is
    read only in steps where no turn is due, so it runs out of cells after the turn, and is dropped
    then, the turn's cells kept.)"""
    from gateway.models.llama_cpp.batch import BatchDecoder

    decoder = BatchDecoder(llm._llm, n_ctx=256, sequences=1, prefixes=1)
    try:
        background = llm.chat.tokenize(" ".join(f"north{i}" for i in range(60)))[:150]
        turn = llm.chat.tokenize(" ".join(f"south{i}" for i in range(60)))[:150]
        assert len(background) == len(turn) == 150, "together over the 256 cells"
        lease = decoder.lease()
        with decoder._cond:  # both queued before the step thread looks at either
            warm = decoder.warm(background, limit=1000)
            assert warm is not None
        logits, _ = lease.evaluate(turn, lambda: False)
        assert logits is not None and logits.shape == (decoder.n_vocab,), "the turn was read"
        deadline = time.monotonic() + 60
        while not warm.done and time.monotonic() < deadline:
            time.sleep(0.05)
        assert warm.done, "the background read was dropped"
        assert lease.tokens == turn, "the turn's cells were kept"
        lease.release()
    finally:
        decoder.close()


@pytest.mark.slow  # tens of seconds of model turns
def test_a_read_ahead_is_not_read_beside_a_reply_being_generated(llm) -> None:
    """A read-ahead is for a turn that may not come; 16 prompt tokens beside a decode step make the
    step several times as long on one thread, and every caller hearing a reply waits for it. So it
    is read only while no turn reads or generates: here none of it is read while another reply is
    generated, and all of it once that reply is done (four talking callers: docs/BENCHMARKS.md)."""
    llm.decoder.forget()
    holder: dict = {}
    left_while_generating: list[int] = []

    def on_text(piece: str) -> None:  # the generating thread, between two of its tokens
        holder.setdefault("first_piece", threading.Event()).set()
        evaluation = holder.get("evaluation")
        if evaluation is not None and evaluation.resolved:
            left_while_generating.append(len(evaluation.tokens))

    holder["first_piece"] = threading.Event()
    reply = conversation("Describe the old harbour of Gdansk in three sentences.")
    generating = threading.Thread(target=lambda: llm.generate(**plain(reply, 40, on_text=on_text)))
    generating.start()
    try:
        assert holder["first_piece"].wait(120), "the reply started"
        warm = llm.read_ahead(conversation("Which beaches near Sopot are quiet in June?"), 16)
        assert warm is not None
        holder["evaluation"] = warm._evaluation
    finally:
        generating.join(180)
    assert not generating.is_alive()
    assert len(left_while_generating) >= 5, ("the reply went on after the read-ahead began", left_while_generating)
    assert len(set(left_while_generating)) == 1, ("nothing was read beside the reply", left_while_generating)
    assert left_while_generating[0] > 4, left_while_generating
    deadline = time.monotonic() + 60
    while not warm.done and time.monotonic() < deadline:
        time.sleep(0.05)
    assert warm.done and not holder["evaluation"].tokens, "read once the reply was done"
    warm.cancel()


def test_a_session_warm_takes_the_prefix_sequence_of_a_read_ahead(llm) -> None:
    """Read-aheads wait while callers talk, so they may hold every prefix sequence for a while; a
    new call's instructions and tools (wanted for sure) then take one instead of being refused,
    which would leave that call's first turn to read them itself."""
    from gateway.models.llama_cpp.batch import BatchDecoder

    decoder = BatchDecoder(llm._llm, n_ctx=512, sequences=1, prefixes=1)
    try:
        ahead = llm.chat.tokenize(" ".join(f"east{i}" for i in range(30)))[:60]
        session = llm.chat.tokenize(" ".join(f"west{i}" for i in range(30)))[:60]
        with decoder._cond:  # both asked for before the step thread reads either
            read_ahead = decoder.warm(ahead, limit=1000, speculative=True)
            assert read_ahead is not None and not read_ahead.done
            assert decoder.warm(llm.chat.tokenize("another read ahead"), limit=1000, speculative=True) is None
            session_warm = decoder.warm(session, limit=1000)
            assert session_warm is not None, "the session warm took the read-ahead's sequence"
            assert read_ahead.done, "the read-ahead was let go, unread"
        deadline = time.monotonic() + 60
        while not session_warm.done and time.monotonic() < deadline:
            time.sleep(0.02)
        assert session_warm.done and decoder.warm(session, limit=1000) is None, "the session prompt is held"
        session_warm.cancel()
    finally:
        decoder.close()


@pytest.mark.slow  # real decoder steps (~8 s on this 2-core box); CI runs it with -m slow
def test_the_llm_load_the_admission_learns_counts_no_work_that_yields(llm) -> None:
    """The admission's LLM share (``LoadMeter``'s ``llm_share``, from the decoder's ``busy_s``)
    counted every step, read-aheads and held preemptive replies included: work that gives way to
    any turn inflated what a talking call seems to cost. A read-ahead and a reply with no deadline
    (a preemptive reply not adopted) are now ``yielding_s``; a turn's read is the share."""
    from gateway.models.compute.deadline import NO_DEADLINE
    from gateway.models.llama_cpp.batch import BatchDecoder
    from gateway.pool.load import LoadMeter

    decoder = BatchDecoder(llm._llm, n_ctx=512, sequences=2, prefixes=1)
    clock = [100.0]
    meter = LoadMeter(
        live=lambda: 1,
        talking=lambda: 1,
        misses=lambda: (0, 0.0),
        lone_step_ms=lambda: 50.0,
        llm_busy_s=lambda: decoder.busy_s,
        cores=2,
        clock=lambda: clock[0],
        cpu_s=lambda: 0.0,
        box=lambda: None,
    )

    def share_over(work) -> float:
        meter.tick()
        work()
        clock[0] += 1.0  # one second of the meter's clock for each piece of work
        meter.tick()
        share = meter.load().llm_share
        assert share is not None
        return share

    try:
        ahead = llm.chat.tokenize(" ".join(f"east{i}" for i in range(30)))[:60]
        held = llm.chat.tokenize(" ".join(f"west{i}" for i in range(30)))[:60]
        due = llm.chat.tokenize(" ".join(f"south{i}" for i in range(30)))[:60]

        def read_ahead() -> None:
            warm = decoder.warm(ahead, limit=1000, speculative=True)
            assert warm is not None
            deadline = time.monotonic() + 60
            while not warm.done and time.monotonic() < deadline:
                time.sleep(0.02)
            assert warm.done

        def preemptive_held() -> None:
            lease = decoder.lease()
            logits, _ = lease.evaluate(held, lambda: False, due=NO_DEADLINE)
            assert logits is not None
            lease.release()

        def turn() -> None:
            lease = decoder.lease()
            logits, _ = lease.evaluate(due, lambda: False)
            assert logits is not None
            lease.release()

        assert share_over(read_ahead) == 0.0
        assert share_over(preemptive_held) == 0.0
        assert decoder.yielding_s > 0.0, "both were read, as yielding work"
        assert share_over(turn) > 0.0, "a turn's read is the LLM's load"
        assert decoder.busy_s > 0.0
    finally:
        decoder.close()


class _TimedLib:
    """llama.cpp's library as the decoder calls it, with the wall time of its llama_decode calls."""

    def __init__(self, lib) -> None:
        self._lib, self.decode_s = lib, 0.0

    def __getattr__(self, name: str):
        return getattr(self._lib, name)

    def llama_decode(self, ctx, batch) -> int:
        started = time.perf_counter()
        try:
            return self._lib.llama_decode(ctx, batch)
        finally:
            self.decode_s += time.perf_counter() - started


def test_the_llm_load_of_a_lone_call_counts_the_threads_its_steps_take(llm) -> None:
    """A lone call's steps run on ``llm_idle_threads`` (2: both cores), a talker's beside others on
    the busy setting's one thread. The decoder's ``busy_s`` (the admission's LLM share) counted wall
    time, so a lone caller taught about half the share a talker takes (loadtest, 8.3 tok/s: 0.15 of
    the thread after the lone phase against 0.20-0.25 per talker with 3-5 talking), and the default
    admission took a 4th talker at 1.59x / 2.39x the lone turn. Now a step counts its threads over
    the busy setting's: 2x on 2 threads, 1x on the busy setting."""
    from gateway.models.compute.core_use import CORE_USE, LlamaThreads
    from gateway.models.llama_cpp.batch import BatchDecoder

    decoder = BatchDecoder(llm._llm, n_ctx=512, sequences=2, prefixes=1)
    decoder.threads = LlamaThreads(decode=1, prompt=1, several=1, idle=2)
    timed = _TimedLib(decoder._lib)
    decoder._lib = timed
    saved_calls = CORE_USE.calls
    question = llm.chat.tokenize(" ".join(f"north{i}" for i in range(20)))[:40]

    def turn_on(threads: tuple[int, int]) -> tuple[float, float]:
        busy_before, decode_before, wall_before = decoder.busy_s, timed.decode_s, decoder.busy_wall_s
        lease = decoder.lease()
        logits, _ = lease.evaluate(question, lambda: False)
        assert logits is not None
        lease.release()
        assert decoder._threads_now == threads
        took = timed.decode_s - decode_before
        # The share of the time the thread computes (``llm_share``, at most 1.0) is wall time.
        assert decoder.busy_wall_s - wall_before == pytest.approx(took, rel=0.05)
        return decoder.busy_s - busy_before, took

    try:
        CORE_USE.calls = 1  # one call connected, no heavy model call: the idle setting, both cores
        counted, took = turn_on((2, 2))
        assert took > 0 and counted == pytest.approx(2 * took, rel=0.05), (counted, took)
        with CORE_USE.heavy():  # an STT call beside it: the busy setting, one thread
            counted, took = turn_on((1, 1))
        assert took > 0 and counted == pytest.approx(took, rel=0.05), (counted, took)
    finally:
        CORE_USE.calls = saved_calls
        decoder.close()
