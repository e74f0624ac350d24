"""Per-turn latency: one timestamp per stage boundary, all ``time.monotonic()`` seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# The stages of ``TurnLatency.as_ms()``, in order: (key, label). The key names the span in
# ``as_ms()``, ``gateway.latency`` and the ``vg_turn_latency_ms`` metric; the label is what a page
# shows for it (``gateway.latency`` carries this list as ``stages``).
STAGES: tuple[tuple[str, str], ...] = (
    ("vad_end_of_turn", "End of turn (VAD)"),
    ("stt", "STT"),
    ("llm_first_token", "LLM first token"),
    ("first_sentence", "First sentence"),
    ("tts_first_chunk", "TTS first chunk"),
    ("first_audio_frame", "First frame"),
    ("voice_to_voice", "Voice-to-voice"),
)


@dataclass
class TurnLatency:
    """Timestamps of one turn. Each field is written once, by the stage that reaches that point."""

    speech_end: Optional[float] = None  # arrival of the last voiced audio chunk
    end_of_turn: Optional[float] = None  # VAD decided the turn is over (silence long enough)
    stt_done: Optional[float] = None
    response_requested: Optional[float] = None
    llm_first_token: Optional[float] = None
    first_sentence: Optional[float] = None
    tts_first_chunk: Optional[float] = None
    first_audio_frame: Optional[float] = None  # the first reply frame left on the track

    def as_ms(self) -> dict[str, Optional[float]]:
        """Durations in ms, keyed by the :data:`STAGES` keys in their order: each stage from the
        previous point, and voice_to_voice (speech end to first reply frame). A value is None when
        either end was not reached (e.g. a typed turn)."""

        def span(a: Optional[float], b: Optional[float]) -> Optional[float]:
            return None if a is None or b is None else round((b - a) * 1000.0, 1)

        ends = self._span_ends()
        return {key: span(*ends[key]) for key, _label in STAGES}

    def _span_ends(self) -> dict[str, tuple[Optional[float], Optional[float]]]:
        """(start, end) timestamps of each stage key."""
        llm_start = self.response_requested or self.stt_done
        return {
            "vad_end_of_turn": (self.speech_end, self.end_of_turn),
            "stt": (self.end_of_turn, self.stt_done),
            "llm_first_token": (llm_start, self.llm_first_token),
            "first_sentence": (self.llm_first_token, self.first_sentence),
            "tts_first_chunk": (self.first_sentence, self.tts_first_chunk),
            "first_audio_frame": (self.tts_first_chunk, self.first_audio_frame),
            "voice_to_voice": (self.speech_end, self.first_audio_frame),
        }

    def mark(self, name: str, when: float) -> None:
        """Set field ``name`` unless it is already set (first occurrence wins)."""
        if getattr(self, name) is None:
            setattr(self, name, when)
