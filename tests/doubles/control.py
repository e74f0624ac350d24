"""The pipeline control a RealtimeSession drives (``PipelineControl``) and a manual clock for its timers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage, FunctionTool
from gateway.pipeline import events as pe
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.latency import TurnLatency


class PipelineControlDouble:
    """Test double of ``PipelineControl`` (what PipelineUnit offers the protocol layer).

    Holds the call's ``settings`` (the configured defaults, as a unit's after its claim;
    ``apply_settings`` replaces them and records the prompt it would read ahead in ``prepared``),
    records every call in ``calls``, every response request in ``requests`` and every
    ``keep_alive`` in ``touches``; ``interrupt()`` reports the queued or playing reply audio that
    ``play()`` set up, as the unit's playout would.
    """

    def __init__(self, config: Optional[GatewayConfig] = None, call_id: str = "call-under-test") -> None:
        self.call_id = call_id
        self.settings = CallSettings.defaults(config or GatewayConfig())
        self.calls: list[str] = []
        self.requests: list[tuple[list[ChatMessage], bool, int]] = []  # (messages, audio, max_tokens)
        self.tool_requests: list[tuple[list[FunctionTool], str]] = []  # (tools, tool_choice) of each request
        self.turn_cuts: list[bool] = []  # of each request: may the caller's speech cut it (not out of band)
        self.generation = 0
        self.live = False
        self.audio: Optional[tuple[int, int, str]] = None  # (generation, played_ms, heard text)
        self.touches = 0
        self.prepared: list[tuple[str, list, str]] = []  # (instructions, tools, tool_choice) of each apply
        self.read_aheads: list[tuple[list[ChatMessage], Optional[int], list, str]] = []
        self.read_ahead_replies: list[bool] = []  # each read_ahead's ``reply``

    def current_settings(self) -> CallSettings:
        return self.settings

    def apply_settings(self, settings: CallSettings) -> None:
        self.settings = settings
        self.prepared.append((settings.instructions, list(settings.tools), settings.tool_choice))

    def read_ahead(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens,
        tools: list,
        tool_choice: str,
        audio: bool = True,
        reply: bool = True,
    ) -> None:
        self.read_aheads.append((list(messages), max_tokens, list(tools), tool_choice))
        self.read_ahead_replies.append(reply)

    def keep_alive(self) -> None:
        self.touches += 1

    def commit_input(self) -> None:
        self.calls.append("commit_input")

    def clear_input(self) -> None:
        self.calls.append("clear_input")

    def create_response(
        self,
        messages: list[ChatMessage],
        audio: bool = True,
        *,
        max_tokens: Optional[int] = None,
        latency: Optional[TurnLatency] = None,
        tools: Optional[list[FunctionTool]] = None,
        tool_choice: str = "auto",
        turn_cuts: bool = True,
    ) -> int:
        self.calls.append("create_response")
        self.tool_requests.append((list(tools or []), tool_choice))
        self.turn_cuts.append(turn_cuts)
        self.generation += 1
        self.live = True
        self.audio = None  # a new generation makes older queued audio stale
        self.requests.append((messages, audio, self.settings.max_tokens if max_tokens is None else max_tokens))
        return self.generation

    def interrupt(self) -> Optional[pe.Interruption]:
        self.calls.append("interrupt")
        was_live, audio = self.live, self.audio
        self.live, self.audio = False, None
        if audio is not None:
            return pe.Interruption(audio[0], audio_cleared=True, played_ms=audio[1], heard_text=audio[2])
        return pe.Interruption(self.generation, audio_cleared=False) if was_live else None

    def play(self, played_ms: int, heard: str) -> None:
        """The current generation's audio is queued/playing (what the caller heard so far)."""
        self.audio = (self.generation, played_ms, heard)


class TimersDouble:
    """A manual clock and ``call_later`` (the idle timeout's), advanced by the test."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pending: list[list] = []  # [due, callback, cancelled]

    def clock(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        entry = [self.now + delay, callback, False]
        self.pending.append(entry)

        class Handle:
            def cancel(self_inner) -> None:
                entry[2] = True

        return Handle()

    def advance(self, seconds: float) -> None:
        """Move the clock on and run what fell due, in order."""
        target = self.now + seconds
        while True:
            due = sorted((e for e in self.pending if not e[2] and e[0] <= target), key=lambda e: e[0])
            if not due:
                break
            entry = due[0]
            entry[2] = True
            self.now = entry[0]
            entry[1]()
        self.now = target

    @property
    def armed(self) -> int:
        return sum(1 for e in self.pending if not e[2])
