"""The shared speech models' slots (``SPEECH_MODELS``, by deadline) are for engines that compute in
this process: an STT or TTS engine behind an HTTP server (``computes_here = False``) waits on the
network, so its calls take no slot and never queue behind this box's local speech work."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from gateway.models.compute.deadline import SPEECH_MODELS
from gateway.pipeline.events import TranscriptDrafted, TranscriptionCompleted
from gateway.pipeline.messages import TextChunk, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stt import SttStage
from gateway.pipeline.tts import TtsStage
from tests.doubles import ContextDouble, SttDouble, TextToSpeechDouble, TtsContextDouble


@contextmanager
def every_slot_taken() -> Iterator[None]:
    """Every slot of SPEECH_MODELS held by another thread (local speech work of other calls)."""
    release = threading.Event()
    taken = threading.Barrier(SPEECH_MODELS.slots + 1)

    def hold() -> None:
        with SPEECH_MODELS.slot(time.monotonic()):
            taken.wait(timeout=10)
            release.wait(timeout=60)

    holders = [threading.Thread(target=hold, daemon=True) for _ in range(SPEECH_MODELS.slots)]
    for holder in holders:
        holder.start()
    taken.wait(timeout=10)
    try:
        yield
    finally:
        release.set()
        for holder in holders:
            holder.join(timeout=10)


def in_thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_a_server_engine_is_not_held_behind_local_speech_work_and_a_local_one_is() -> None:
    turn = np.zeros(16000, np.float32)
    remote_stt, local_stt = SttDouble(), SttDouble()
    remote_stt.computes_here = False  # type: ignore[attr-defined]
    remote_tts, local_tts = TextToSpeechDouble(), TextToSpeechDouble()
    remote_tts.computes_here = False  # type: ignore[attr-defined]
    contexts = {name: ContextDouble() for name in ("remote", "local")}
    stt = {name: SttStage(contexts[name], StageQueue(), None, model) for name, model in
           (("remote", remote_stt), ("local", local_stt))}  # fmt: skip
    tts = {name: TtsStage(TtsContextDouble(), StageQueue(), None, model) for name, model in  # type: ignore[arg-type]
           (("remote", remote_tts), ("local", local_tts))}  # fmt: skip
    with every_slot_taken():
        remote = [
            in_thread(lambda: stt["remote"].handle(Utterance("rtc_a", audio=turn))),
            in_thread(lambda: tts["remote"].handle(TextChunk("rtc_a", generation=1, text="Hello."))),
        ]
        local = [
            in_thread(lambda: stt["local"].handle(Utterance("rtc_b", audio=turn))),
            in_thread(lambda: tts["local"].handle(TextChunk("rtc_b", generation=1, text="Hello."))),
        ]
        for thread in remote:
            thread.join(timeout=10)
        assert not any(thread.is_alive() for thread in remote), "a server's call waited for a local slot"
        assert contexts["remote"].of(TranscriptionCompleted) and remote_tts.calls
        assert all(thread.is_alive() for thread in local), "local speech work must wait for its slot"
        assert not contexts["local"].of(TranscriptionCompleted) and not local_tts.calls
    for thread in local:
        thread.join(timeout=10)
    assert contexts["local"].of(TranscriptionCompleted) and local_tts.calls


def test_a_pause_draft_the_caller_talked_past_while_it_waited_is_never_transcribed() -> None:
    """A pause's speculative transcript waits for the speech models like any call; when the caller goes
    on before its slot comes (the VAD sets ``voided``), it is skipped, not computed for nothing, and
    the finished turn is transcribed whole. A draft still standing when its slot comes is transcribed."""
    turn = np.concatenate([np.zeros(1600, np.float32), np.full(8000, 0.1, np.float32)])
    model, ctx = SttDouble(), ContextDouble()
    stage = SttStage(ctx, StageQueue(), None, model)
    voided, standing = threading.Event(), threading.Event()
    with every_slot_taken():
        waiting = [
            in_thread(
                lambda: stage.handle(Utterance("rtc_a", audio=turn, speculative=True, speculation=1, voided=voided))
            )
        ]
        time.sleep(0.1)
        assert waiting[0].is_alive(), "the draft must wait for its slot"
        voided.set()  # the caller went on after the pause
        waiting[0].join(timeout=5)
        assert not waiting[0].is_alive(), "a voided draft must stop waiting at once, slots still taken"
    assert model.calls == [], "a voided draft was transcribed"
    assert not ctx.of(TranscriptDrafted)
    stats = stage.speculation.snapshot()
    assert stats["skipped"] == 1 and stats["started"] == 0
    stage.handle(Utterance("rtc_a", audio=np.concatenate([turn, turn]), speculation=1))
    assert model.calls == ["one two"] and [e.transcript for e in ctx.of(TranscriptionCompleted)] == ["one two"]

    with every_slot_taken():
        draft = in_thread(
            lambda: stage.handle(Utterance("rtc_a", audio=turn, speculative=True, speculation=2, voided=standing))
        )
        time.sleep(0.1)
        assert draft.is_alive()
    draft.join(timeout=5)
    assert model.calls[-1] == "one" and stage.speculation.snapshot()["started"] == 1
    stage.handle(Utterance("rtc_a", audio=turn, speculation=2))
    assert model.calls[-1] == "one" and len(model.calls) == 2, "the standing draft's text stands for the turn"
    assert [e.transcript for e in ctx.of(TranscriptionCompleted)] == ["one two", "one"]
