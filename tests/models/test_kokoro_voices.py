"""Voice per session (OpenAI names mapped to Kokoro voices), Kokoro's sentences and phonemes, and the
TTS stage speaking in the session's voice."""

from __future__ import annotations

from gateway.models.kokoro.g2p import split_phonemes, split_sentences
from gateway.models.kokoro.voices import ONNX_COLUMN, OPENAI_VOICES, TORCH_COLUMN, resolve_voice
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.messages import TextChunk
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.tts import TtsStage
from tests.doubles import TextToSpeechDouble, TtsContextDouble

REALTIME_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar")


def test_every_realtime_voice_maps_to_a_kokoro_voice_of_each_backend() -> None:
    for name in REALTIME_VOICES:
        torch_voice, onnx_voice = OPENAI_VOICES[name]
        assert torch_voice[:2] in ("af", "am", "bf", "bm") and onnx_voice[:2] in ("jf", "jm")
        assert torch_voice[1] == "fm"[onnx_voice[1] == "m"], f"{name}: one gender in both columns"
    english = {v[TORCH_COLUMN] for v in OPENAI_VOICES.values()} | {"af_heart"}
    assert resolve_voice("Marin", english, TORCH_COLUMN, "af_heart") == "af_heart"
    assert resolve_voice("shimmer", english, TORCH_COLUMN, "af_heart") == "af_bella"
    assert resolve_voice("am_onyx", english, TORCH_COLUMN, "af_heart") == "am_onyx"
    assert resolve_voice("nobody", english, TORCH_COLUMN, "af_heart") == "af_heart"
    assert resolve_voice("cedar", {"jf_alpha", "jm_kumo"}, ONNX_COLUMN, "jf_alpha") == "jm_kumo"


def test_sentences_and_phoneme_pieces_fit_kokoro() -> None:
    assert split_sentences("Hi there! How are you? Fine.  ") == ["Hi there!", "How are you?", "Fine."]
    long = ("hˈɛloʊ wˈɜːld, " * 60).strip()
    pieces = split_phonemes(long, 100)
    assert all(0 < len(p) <= 100 for p in pieces) and all(p.endswith(",") for p in pieces[:-1])
    assert " ".join(pieces) == long


def test_the_tts_stage_speaks_each_chunk_in_its_session_voice() -> None:
    tts = TextToSpeechDouble()
    ctx = TtsContextDouble()
    stage = TtsStage(ctx, StageQueue(), None, tts)  # type: ignore[arg-type]
    stage.handle(TextChunk("rtc_test", generation=1, text="Hello.", settings=CallSettings(speed=1.25, voice="echo")))
    stage.handle(TextChunk("rtc_test", generation=1, text="Bye."))
    assert tts.calls == [("Hello.", 1.25, "echo"), ("Bye.", 1.0, None)]
    assert ctx.playout.written and ctx.playout.written[0] > 0  # resampled to 48 kHz and queued
