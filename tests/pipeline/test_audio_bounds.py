"""The unit's queues that hold caller audio are bounded by its seconds, not only by message count:
a few large messages (a WebSocket append used to be queued whole: up to 131 s of audio) cannot
hold minutes of audio while a stage lags. Oldest audio is dropped and counted; control markers
stay; a finished turn dropped from the STT queue is reported as a failed transcription, in order."""

from __future__ import annotations

import numpy as np

from gateway.pipeline.chain import STT_INBOX_S, VAD_INBOX_S, StageChain
from gateway.pipeline.events import TranscriptionFailed
from gateway.pipeline.messages import AudioIn, CallEnd, TurnsDropped, Utterance
from gateway.pipeline.queues import StageQueue
from tests.doubles import ContextDouble

CALL = "call-under-test"


def chain(models) -> tuple[StageChain, ContextDouble]:
    """A unit's stage chain on the real models, its threads not started: nothing takes from it."""
    ctx = ContextDouble(call_id=CALL)
    return StageChain.build(ctx, models, lambda marker: None), ctx  # type: ignore[arg-type]


def test_the_vad_inbox_holds_seconds_of_audio_not_a_thousand_messages(models):
    built, _ = chain(models)
    rate = models.vad.sample_rate
    queue = built.vad_in
    for second in range(1005):  # one-second messages, as a large append made them
        queue.put(AudioIn(CALL, samples=np.full(rate, second % 100, np.int16)))
        if second == 500:
            queue.put(CallEnd(CALL))
    held = [queue.get(0) for _ in range(len(queue))]
    audio = [m for m in held if isinstance(m, AudioIn)]
    assert sum(m.samples.size for m in audio) <= VAD_INBOX_S * rate  # was 1000 s (30.5 MiB)
    assert queue.dropped == 1005 - int(VAD_INBOX_S)
    assert isinstance(held[0], CallEnd)  # a control marker is never dropped
    kept = [int(m.samples[0]) for m in audio]
    assert kept == [second % 100 for second in range(1005 - int(VAD_INBOX_S), 1005)]  # the newest


def test_twenty_millisecond_frames_keep_the_count_bound():
    queue = StageQueue(max_audio_samples=30 * 16000)
    for _ in range(1200):
        queue.put(AudioIn(CALL, samples=np.zeros(320, np.int16)))
    assert len(queue) == 1000 and queue.dropped == 200


def test_one_message_larger_than_the_bound_is_kept_alone():
    queue = StageQueue(max_audio_samples=16000)
    queue.put(AudioIn(CALL, samples=np.zeros(8000, np.int16)))
    queue.put(AudioIn(CALL, samples=np.zeros(48000, np.int16)))
    assert len(queue) == 1 and queue.audio_samples == 48000 and queue.dropped == 1
    queue.get(0)
    assert queue.audio_samples == 0


def test_turns_dropped_from_the_stt_queue_fail_in_commit_order(models):
    built, ctx = chain(models)
    rate = models.vad.sample_rate
    queue = built.stt_in
    for turn in range(5):  # five 20 s turns committed while STT is busy
        queue.put(Utterance(CALL, audio=np.full(20 * rate, turn / 10, np.float32)))
    held = [queue.get(0) for _ in range(len(queue))]
    assert sum(m.audio.size for m in held if isinstance(m, Utterance)) <= STT_INBOX_S * rate  # was 100 s
    # The two oldest turns left one stand-in where they were: the turns after them keep their place.
    assert isinstance(held[0], TurnsDropped) and held[0].turns == 2
    assert [round(float(m.audio[0]), 1) for m in held[1:]] == [0.2, 0.3, 0.4]
    built.stt.handle(held[0])
    failed = ctx.of(TranscriptionFailed)
    assert len(failed) == 2 and all(e.call_id == CALL and "dropped" in e.message for e in failed)


def test_a_dropped_speculation_leaves_nothing():
    queue = StageQueue(max_audio_samples=16000)
    queue.put(Utterance(CALL, audio=np.zeros(12000, np.float32), speculative=True, speculation=1))
    queue.put(Utterance(CALL, audio=np.zeros(12000, np.float32)))
    held = queue.get(0)
    assert isinstance(held, Utterance) and not held.speculative and queue.get(0) is None
