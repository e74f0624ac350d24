"""Turn detection settings of one session (Realtime ``audio.input.turn_detection``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class TurnDetection:
    """``mode``: "server_vad" (the VAD ends turns) or "manual" (only ``input_audio_buffer.commit`` does).

    ``kind`` is what the client asked for ("server_vad" or "semantic_vad", which is served by the
    same VAD with an eagerness-based silence). ``threshold`` 0..1 speech probability; durations in
    ms. ``min_speech_ms`` is the echo guard: speech shorter than this neither starts a turn nor
    interrupts a reply.
    """

    mode: str = "server_vad"
    kind: str = "server_vad"
    eagerness: str = "auto"
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    min_speech_ms: int = 96
    create_response: bool = True
    interrupt_response: bool = True
    idle_timeout_ms: Optional[int] = None
    max_utterance_s: float = 30.0

    def apply(self, settings: Optional[dict]) -> None:
        """Apply a validated ``turn_detection`` object; None switches to manual turns."""
        if settings is None:
            self.mode = "manual"
            return
        self.mode = "server_vad"
        self.kind = settings.get("type", "server_vad")
        if self.kind == "semantic_vad":
            self.eagerness = settings.get("eagerness", "auto")
        for name in ("threshold", "prefix_padding_ms", "silence_duration_ms", "create_response",
                     "interrupt_response", "idle_timeout_ms"):
            value = settings.get(name)
            if value is not None:
                setattr(self, name, value)
