"""The effective settings of one Realtime session (:class:`SessionSettings`): where a session
starts (the pipeline's settings for the call) and how :func:`~gateway.realtime.session_config.parse_update`'s
normalised changes are applied to them, making the call's next :class:`CallSettings`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from gateway.pipeline.call_settings import CALL_SETTING_NAMES, CallSettings
from gateway.pipeline.turn import BARGE_IN_FIELDS, TurnDetection
from gateway.realtime.items import ClientError
from gateway.realtime.session_config import PCM_24K
from gateway.realtime.tools import ToolChoice, check_choice, engine_tool_choice

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

    ``call`` is what the pipeline uses (a frozen :class:`CallSettings`, replaced whole by
    :meth:`apply` and handed over with ``PipelineControl.apply_settings``). The rest is the
    session's own: ``modalities`` is ``["audio"]`` or ``["text"]``; ``model``,
    ``transcription_model`` and the formats are what the client asked for, kept for the record
    (the local model serves any name); ``tool_choice`` is the client's form of ``call.tool_choice``
    (``tools.ToolChoice``: what the views show and a response's tools are checked against).
    ``token_cap`` is the configured per-response cap: what ``"inf"`` means, and what no client may
    exceed. ``turn_defaults`` fill the fields a new ``turn_detection`` object leaves out.
    ``session_type`` is ``"realtime"`` or ``"transcription"`` (OpenAI's transcription session: the
    caller's turns are transcribed and never answered, so ``call`` keeps ``create_response``,
    ``interrupt_response`` and ``preemptive_reply`` off whatever an update asks).
    """

    call: CallSettings
    token_cap: int
    turn_defaults: dict[str, Any]
    modalities: list[str] = field(default_factory=lambda: ["audio"])
    model: Optional[str] = None
    transcription_model: Optional[str] = None
    input_format: dict = field(default_factory=lambda: dict(PCM_24K))
    output_format: dict = field(default_factory=lambda: dict(PCM_24K))
    tool_choice: ToolChoice = "auto"
    session_type: str = "realtime"

    @property
    def transcription_only(self) -> bool:
        """True for a transcription session: no response is ever made."""
        return self.session_type == "transcription"

    @classmethod
    def from_pipeline(cls, current: CallSettings) -> SessionSettings:
        """The settings a session starts from: the pipeline's for the call (the configured defaults)."""
        return cls(
            call=current,
            token_cap=int(current.max_tokens),
            turn_defaults={name: getattr(current.turn, name) for name in TURN_RESET_FIELDS},
        )

    @property
    def audio(self) -> bool:
        """True when responses are spoken (``audio`` in the output modalities)."""
        return "audio" in self.modalities

    def cap_tokens(self, requested: Union[int, str]) -> int:
        """A requested token cap (an int or ``"inf"``) bounded by the configured one."""
        return self.token_cap if requested == "inf" else min(int(requested), self.token_cap)

    def apply(self, changes: Mapping[str, Any]) -> None:
        """Apply :func:`parse_update`'s normalised changes (validated: nothing here can fail). A
        change named as a ``CallSettings`` field replaces it; ``max_tokens`` is capped,
        ``turn_detection`` makes a new ``turn``, ``tool_choice`` is kept in both forms."""
        if "modalities" in changes:
            self.modalities = ["audio"] if "audio" in changes["modalities"] else ["text"]
        for name in ("model", "transcription_model", "input_format", "output_format", "tool_choice", "session_type"):
            if name in changes:
                setattr(self, name, changes[name])
        call = {name: value for name, value in changes.items() if name in CALL_SETTING_NAMES}
        if "tools" in changes:
            call["tools"] = tuple(changes["tools"])
        if "max_tokens" in changes:
            call["max_tokens"] = self.cap_tokens(changes["max_tokens"])
        if "turn_detection" in changes:
            call["turn"] = self._new_turn(changes["turn_detection"])
        call["tool_choice"] = engine_tool_choice(self.tool_choice, list(call.get("tools", self.call.tools)))
        if self.transcription_only:  # turns are transcribed, never answered nor interrupting
            turn = call.get("turn", self.call.turn)
            call["turn"] = dataclasses.replace(turn, create_response=False, interrupt_response=False)
            call["preemptive_reply"] = False
        self.call = dataclasses.replace(self.call, **call)

    def check_type(self, changes: Mapping[str, Any]) -> None:
        """ClientError when ``changes`` would turn a transcription session back into a realtime one
        (the gateway's rule: a session's type may only become ``transcription``)."""
        if self.transcription_only and changes.get("session_type") == "realtime":
            raise ClientError(
                "Invalid value for 'session.type': a transcription session cannot become a realtime session; "
                "open a new session.",
                "invalid_value",
                "session.type",
            )

    def check_tools(self, changes: Mapping[str, Any]) -> None:
        """ClientError when ``changes`` would leave a named ``tool_choice`` that is not one of the
        tools (checked before :meth:`apply`, with the tools and choice the update leaves)."""
        if "tools" in changes or "tool_choice" in changes:
            check_choice(
                changes.get("tool_choice", self.tool_choice),
                changes.get("tools", list(self.call.tools)),
                "session.tool_choice",
            )

    def _new_turn(self, settings: Optional[dict]) -> TurnDetection:
        """A new turn_detection object replaces the old one: fields it leaves out get their defaults;
        None means manual turns."""
        if settings is None:
            return self.call.turn.updated(None)
        turn = self.call.turn.updated({**self.turn_defaults, **settings})
        return dataclasses.replace(turn, idle_timeout_ms=settings.get("idle_timeout_ms"))  # None clears it
