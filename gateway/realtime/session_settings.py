"""The effective settings of one Realtime session (:class:`SessionSettings`): where a session
starts (the pipeline's settings for the call) and how :func:`~gateway.realtime.session_config.parse_update`'s
normalised changes are applied to them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from gateway.models.base import FunctionTool
from gateway.pipeline.turn import BARGE_IN_FIELDS, TurnDetection
from gateway.realtime.control import CallSettings
from gateway.realtime.session_config import PCM_24K
from gateway.realtime.tools import ToolChoice, check_choice

# The fields of a TurnDetection that a new ``turn_detection`` object resets when it leaves them out.
TURN_RESET_FIELDS = (
    "threshold",
    "prefix_padding_ms",
    "silence_duration_ms",
    "create_response",
    "interrupt_response",
    *BARGE_IN_FIELDS,
)


@dataclass
class SessionSettings:
    """The effective settings of one Realtime session.

    ``instructions``, ``max_tokens``, ``speed``, ``language`` and ``turn`` are what the pipeline
    uses (pushed to it through ``PipelineControl.update_settings``); ``modalities`` is ``["audio"]``
    or ``["text"]``; ``voice``, ``model``, ``transcription_model`` and the formats are what the
    client asked for, kept for the record (the local model and voice serve any name).
    ``token_cap`` is the configured per-response cap: what ``"inf"`` means, and what no client may
    exceed. ``turn_defaults`` fill the fields a new ``turn_detection`` object leaves out.
    ``tools`` / ``tool_choice`` are what responses may call (``gateway.realtime.tools``).
    ``noise_reduction`` is the caller audio's suppression type (pushed to the pipeline too);
    ``thinking_cue`` what the media track plays while an answer is late (off, tone, filler).
    """

    instructions: str
    max_tokens: int
    speed: float
    language: str
    turn: TurnDetection
    token_cap: int
    turn_defaults: dict[str, Any]
    modalities: list[str] = field(default_factory=lambda: ["audio"])
    voice: Optional[str] = None
    model: Optional[str] = None
    transcription_model: Optional[str] = None
    input_format: dict = field(default_factory=lambda: dict(PCM_24K))
    output_format: dict = field(default_factory=lambda: dict(PCM_24K))
    tools: list[FunctionTool] = field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    noise_reduction: Optional[str] = None  # "near_field" / "far_field"; None: off
    thinking_cue: str = "off"

    @classmethod
    def from_pipeline(cls, current: CallSettings) -> SessionSettings:
        """The settings a session starts from: the pipeline's for the call (the configured defaults)."""
        turn = dataclasses.replace(current.turn)
        return cls(
            instructions=current.instructions,
            max_tokens=current.max_tokens,
            speed=current.speed,
            language=current.language,
            turn=turn,
            token_cap=int(current.max_tokens),
            turn_defaults={name: getattr(turn, name) for name in TURN_RESET_FIELDS},
            thinking_cue=current.thinking_cue,
        )

    @property
    def audio(self) -> bool:
        """True when responses are spoken (``audio`` in the output modalities)."""
        return "audio" in self.modalities

    def cap_tokens(self, requested: Union[int, str]) -> int:
        """A requested token cap (an int or ``"inf"``) bounded by the configured one."""
        return self.token_cap if requested == "inf" else min(int(requested), self.token_cap)

    def apply(self, changes: Mapping[str, Any]) -> None:
        """Apply :func:`parse_update`'s normalised changes (validated: nothing here can fail)."""
        if "instructions" in changes:
            self.instructions = changes["instructions"]
        if "modalities" in changes:
            self.modalities = ["audio"] if "audio" in changes["modalities"] else ["text"]
        for name in (
            "voice",
            "model",
            "transcription_model",
            "input_format",
            "output_format",
            "tools",
            "tool_choice",
            "noise_reduction",
            "thinking_cue",
        ):
            if name in changes:
                setattr(self, name, changes[name])
        if "speed" in changes:
            self.speed = changes["speed"]
        if "max_tokens" in changes:
            self.max_tokens = self.cap_tokens(changes["max_tokens"])
        if "language" in changes:
            self.language = changes["language"]
        if "turn_detection" in changes:
            self.turn = self._new_turn(changes["turn_detection"])

    def check_tools(self, changes: Mapping[str, Any]) -> None:
        """ClientError when ``changes`` would leave a named ``tool_choice`` that is not one of the
        tools (checked before :meth:`apply`, with the tools and choice the update leaves)."""
        if "tools" in changes or "tool_choice" in changes:
            check_choice(
                changes.get("tool_choice", self.tool_choice), changes.get("tools", self.tools), "session.tool_choice"
            )

    def _new_turn(self, settings: Optional[dict]) -> TurnDetection:
        """A new turn_detection object replaces the old one: fields it leaves out get their defaults;
        None means manual turns."""
        turn = dataclasses.replace(self.turn)
        if settings is None:
            turn.apply(None)
        else:
            turn.apply({**self.turn_defaults, **settings})
            turn.idle_timeout_ms = settings.get("idle_timeout_ms")  # apply() skips None; None clears it
        return turn
