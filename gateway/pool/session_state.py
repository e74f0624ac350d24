"""Per-session settings and clocks the stages and watchdogs read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gateway.config import GatewayConfig, config_default
from gateway.pipeline.turn import TurnDetection


@dataclass
class SessionState:
    """What belongs to one caller and is reset when the unit is released.

    ``turn``, ``language``, ``speed``, ``max_tokens``, ``instructions``, ``noise_reduction``,
    ``thinking_cue`` follow ``session.update``
    (the Realtime session sets them through ``PipelineUnit.update_settings``; this is the
    ``CallSettings`` the unit's ``current_settings`` hands it); the clocks are ``time.monotonic()``
    seconds.
    """

    call_id: str | None = None
    turn: TurnDetection = field(default_factory=TurnDetection)
    language: str = "en"
    instructions: str = ""
    speed: float = 1.0
    voice: str | None = None  # audio.output.voice as the client sent it; None: the TTS default
    audio_output: bool = True
    noise_reduction: str | None = None  # audio.input.noise_reduction type; None: off
    thinking_cue: str = config_default("thinking_cue")  # audio.output.thinking_cue: off, tone, filler
    max_tokens: int = config_default("max_response_tokens")
    claimed_at: float = field(default_factory=time.monotonic)
    claimed_at_epoch: float = field(default_factory=time.time)  # for /v1/pool (Unix seconds)
    last_activity: float = field(default_factory=time.monotonic)

    @classmethod
    def for_call(cls, call_id: str | None, config: GatewayConfig) -> SessionState:
        """Fresh state from the configured defaults (VAD settings, instructions, token cap), clocks
        started now; ``call_id`` None for an idle unit."""
        turn = TurnDetection(
            threshold=config.vad_threshold,
            prefix_padding_ms=config.prefix_padding_ms,
            silence_duration_ms=config.silence_duration_ms,
            min_speech_ms=config.min_speech_ms,
            max_utterance_s=config.max_utterance_s,
        )
        return cls(
            call_id=call_id,
            turn=turn,
            instructions=config.instructions,
            max_tokens=config.max_response_tokens,
            thinking_cue=config.thinking_cue,
        )

    def touch(self) -> None:
        """Caller speech or a response happened: the idle timeout starts again."""
        self.last_activity = time.monotonic()
