"""Per-call state the stages and watchdogs read: the call's settings and its clocks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gateway.config import GatewayConfig
from gateway.pipeline.call_settings import CallSettings


@dataclass
class CallState:
    """What belongs to one caller and is reset when the unit is released.

    ``settings`` are the call's (``CallSettings``: replaced whole by ``PipelineUnit.apply_settings``
    at call start and after each ``session.update``; what ``current_settings`` hands the Realtime
    session); the clocks are ``time.monotonic()`` seconds.
    """

    call_id: str | None = None
    settings: CallSettings = field(default_factory=CallSettings)
    claimed_at: float = field(default_factory=time.monotonic)
    claimed_at_epoch: float = field(default_factory=time.time)  # for /v1/pool (Unix seconds)
    last_activity: float = field(default_factory=time.monotonic)
    last_turn: float | None = None  # caller speech began or a response was asked (None: neither yet)

    @classmethod
    def for_call(cls, call_id: str | None, config: GatewayConfig) -> CallState:
        """Fresh state with the configured defaults (``CallSettings.defaults``), clocks started now;
        ``call_id`` None for an idle unit."""
        return cls(call_id=call_id, settings=CallSettings.defaults(config))

    def touch(self) -> None:
        """Caller speech or a response happened: the idle timeout starts again."""
        self.last_activity = time.monotonic()

    def turned(self) -> None:
        """The caller spoke or a response was asked: the call is talking (admission's load) and
        the idle timeout starts again."""
        self.last_turn = self.last_activity = time.monotonic()
