"""Per-turn latency: one timestamp per stage boundary, all ``time.monotonic()`` seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


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
        """Durations in ms: each stage from the previous point, plus voice-to-voice.

        Keys: vad_end_of_turn, stt, llm_first_token, first_sentence, tts_first_chunk,
        first_audio_frame (each measured from the previous point) and voice_to_voice (speech end to
        first reply frame). A value is None when either end was not reached (e.g. a typed turn).
        """

        def span(a: Optional[float], b: Optional[float]) -> Optional[float]:
            return None if a is None or b is None else round((b - a) * 1000.0, 1)

        llm_start = self.response_requested or self.stt_done
        return {
            "vad_end_of_turn": span(self.speech_end, self.end_of_turn),
            "stt": span(self.end_of_turn, self.stt_done),
            "llm_first_token": span(llm_start, self.llm_first_token),
            "first_sentence": span(self.llm_first_token, self.first_sentence),
            "tts_first_chunk": span(self.first_sentence, self.tts_first_chunk),
            "first_audio_frame": span(self.tts_first_chunk, self.first_audio_frame),
            "voice_to_voice": span(self.speech_end, self.first_audio_frame),
        }

    def mark(self, name: str, when: float) -> None:
        """Set field ``name`` unless it is already set (first occurrence wins)."""
        if getattr(self, name) is None:
            setattr(self, name, when)
