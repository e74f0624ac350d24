"""The reply's first audio starts with its voice: the TTS voice's own silence before the first word
(Piper: 320 ms before "He was..." with no noise, 320-420 ms in about half the syntheses with it) is
cut to a short lead-in; later sentences keep their pauses. The real bundled Piper voice through the
real TTS stage (deterministic: no sampled noise)."""

from __future__ import annotations

import numpy as np

from gateway.loadgen.ws_client import VOICED  # the peak at which a client hears the reply
from gateway.media.lead_in import LEAD_IN_KEEP_MS, trim_lead_in
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import TextChunk
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.tts import TtsStage
from tests.doubles import TtsContextDouble
from tests.models.speech_fixtures import load_tts

RATE = 48000


def first_voiced_ms(samples: np.ndarray) -> float:
    """Start of the first 20 ms frame of int16 48 kHz ``samples`` whose peak passes VOICED, ms."""
    frame = RATE // 50
    for start in range(0, len(samples), frame):
        if np.abs(samples[start : start + frame].astype(np.int32)).max() > VOICED:
            return start / RATE * 1000
    raise AssertionError("no voiced frame")


def test_a_replys_first_audio_starts_with_the_voice_not_its_lead_in_silence() -> None:
    tts = load_tts()
    text = "He was not an old supposed young man."
    raw = np.concatenate(list(tts.synthesize(text)))
    assert np.argmax(np.abs(raw) >= 0.002) / tts.sample_rate > 0.25, "the voice's own lead-in (the case)"

    ctx = TtsContextDouble()
    stage = TtsStage(ctx, StageQueue(), None, tts)  # type: ignore[arg-type]
    reply = TurnLatency()  # the turn's, shared by the reply's chunks
    stage.handle(TextChunk("rtc_test", generation=1, text=text, latency=reply))
    stage.handle(TextChunk("rtc_test", generation=1, text=text, latency=reply))  # a later sentence
    first, later = ctx.playout.audio
    assert first_voiced_ms(first) <= 40, first_voiced_ms(first)  # failed before: 320
    assert first_voiced_ms(later) > 250, "a later sentence keeps its pause"


def test_only_silence_before_the_voice_is_cut() -> None:
    rate = 16000
    voice = np.full(800, 0.1, np.float32)
    audio = np.concatenate([np.zeros(rate // 2, np.float32), voice])
    trimmed = trim_lead_in(audio, rate)
    assert len(trimmed) == 800 + int(rate * LEAD_IN_KEEP_MS / 1000) and np.array_equal(trimmed[-800:], voice)
    as_int16 = (audio * 32767).astype(np.int16)
    assert len(trim_lead_in(as_int16, rate)) == len(trimmed), "int16 from a speech server alike"
    silence = np.zeros(rate, np.float32)
    assert trim_lead_in(silence, rate) is silence, "nothing to tell the voice's start by: unchanged"
    early = np.concatenate([np.zeros(80, np.float32), voice])
    assert len(trim_lead_in(early, rate)) == len(early), "the voice starts within the lead-in"
