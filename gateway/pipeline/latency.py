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

# Where a turn's time goes between the end of the caller's turn and the first reply frame, finer
# than STAGES (``TurnLatency.waits_ms()``): (key, start field, end field). Waits for a shared model
# (a speech-model slot, the LLM engine) are apart from its compute; the prompt read and the first
# clause's decode share the LLM's batched steps with other callers. ``gateway.latency`` carries it
# as ``detail_ms`` (the load generator's breakdown of a slow turn).
DETAIL: tuple[tuple[str, str, str], ...] = (
    ("stt_wait", "end_of_turn", "stt_started"),  # a speech-model slot (none: a kept draft, 0)
    ("stt_compute", "stt_started", "stt_done"),
    ("respond", "stt_done", "response_requested"),  # the session asks for the reply
    ("llm_queue", "response_requested", "llm_started"),  # the LLM stage and engine take the turn
    ("prompt_read", "llm_started", "llm_first_token"),  # the prompt's uncached tokens, first token
    ("first_clause_decode", "llm_first_token", "first_sentence"),
    ("tts_wait", "first_sentence", "tts_started"),  # a speech-model slot
    ("tts_compute", "tts_started", "tts_first_chunk"),
    ("playout", "tts_first_chunk", "first_audio_frame"),  # the audio track's next frame
)


@dataclass
class TurnLatency:
    """Timestamps of one turn. Each field is written once, by the stage that reaches that point."""

    speech_end: Optional[float] = None  # arrival of the last voiced audio chunk
    end_of_turn: Optional[float] = None  # VAD decided the turn is over (silence long enough)
    stt_started: Optional[float] = None  # the turn's transcription got its speech-model slot
    stt_done: Optional[float] = None
    response_requested: Optional[float] = None
    llm_started: Optional[float] = None  # the LLM engine asked when the prompt's read is due
    llm_first_token: Optional[float] = None
    first_sentence: Optional[float] = None
    tts_started: Optional[float] = None  # the first sentence's synthesis got its speech-model slot
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

    def waits_ms(self) -> dict[str, Optional[float]]:
        """The :data:`DETAIL` spans in ms, in order; None where either end was not reached. A turn
        whose transcript was a kept draft (no STT call) has ``stt_compute`` 0 (its ``stt_wait``: the
        end of turn to the draft's use)."""
        out: dict[str, Optional[float]] = {}
        for key, start, end in DETAIL:
            a, b = self._at(start), self._at(end)
            out[key] = None if a is None or b is None else round((b - a) * 1000.0, 1)
        return out

    def _at(self, name: str) -> Optional[float]:
        if name == "stt_started" and self.stt_started is None:
            return self.stt_done  # a kept draft: no call
        value: Optional[float] = getattr(self, name)
        return value

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
