"""Graceful shutdown of one gateway process: stop admitting at once, let each call finish the
answer it is hearing, tell the callers, drain every unit.

The one draining flag of the process is :attr:`GracefulShutdown.draining` (``app[SHUTDOWN]``).
Once it is set:

- every way of opening a call is refused with ``503`` + ``Retry-After`` and code
  ``server_shutdown``: the door (``gateway.transports.door.Door``) is given
  ``lambda: shutdown.draining`` and refuses every transport's calls by it (an HTTP route before
  the key is checked, a WebSocket before ``WebSocketResponse.prepare``, a SIP INVITE with a SIP
  ``503``);
- ``GET /healthz`` answers ``503 {"status": "draining"}``, so a load balancer stops sending;
- :meth:`GracefulShutdown.drain` waits for each live call to be quiet (no response generating, no
  reply audio left to play), then ends it with the Realtime ``error`` event code
  ``server_shutdown`` (message "the gateway is shutting down"). Calls still talking when
  ``shutdown_grace_s`` runs out are ended the same way (message says the grace period is over).
  Every unit then drains (a ``CallEnd`` marker through each stage); one that overruns
  ``drain_timeout_s`` is quarantined as usual, and the drain stops waiting for it. Within the same
  ``drain_timeout_s`` it also waits for the goodbyes the hang-ups sent that are still unanswered
  (:meth:`GracefulShutdown.add_goodbyes`: a SIP call's BYE, retransmitted until its final response),
  so the process does not exit before the phone has heard that the call ended.

Calls come from the sources given to :meth:`GracefulShutdown.add_calls` (the door: the live
sessions of every transport): objects with ``id``, ``lease`` (the claimed unit's
``UnitLease``), ``end_reason`` (None while live) and ``async hangup(reason, message)``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from gateway.logging_setup import bind_call
from gateway.pool.end_reason import EndReason
from gateway.pool.lease import UnitLease
from gateway.pool.unit import PipelineUnit, UnitState

log = logging.getLogger(__name__)

SHUTDOWN_MESSAGE = "the gateway is shutting down"
GRACE_OVER_MESSAGE = "the gateway is shutting down (its grace period for calls is over)"
# A call is left to finish when nothing generated or played for this many polls in a row: the gap
# between two sentences of one reply, or between a reply and its end marker, is shorter.
_QUIET_POLLS = 3


class DrainableCall(Protocol):
    """What the drain needs of a live call of any transport."""

    id: str
    lease: UnitLease
    end_reason: Any  # None while the call is live

    def hangup(self, reason: EndReason | str, message: Optional[str] = None) -> Coroutine[Any, Any, None]:
        """End the call once, telling the client why (``error`` event with code ``reason``)."""


CallSource = Callable[[], Iterable[DrainableCall]]


def hearing_answer(lease: UnitLease) -> bool:
    """True while the call has a response generating or reply audio still to play."""
    return lease.busy()


@dataclass
class DrainReport:
    """How a drain went: calls ended quiet (their answer finished) and at the end of the grace
    period, units not idle when the drain stopped waiting, and its length (s)."""

    finished: int = 0
    cut: int = 0
    units_not_idle: list[int] = field(default_factory=list)
    seconds: float = 0.0


class GracefulShutdown:
    """The drain of this process; ``grace_s`` (``shutdown_grace_s``) bounds how long calls may
    finish their answer. ``on_begin()`` runs once, when draining starts (metrics). ``poll_s`` is
    how often calls are looked at."""

    def __init__(self, grace_s: float, drain_timeout_s: float = 10.0, poll_s: float = 0.05) -> None:
        self.grace_s = grace_s
        self.drain_timeout_s = drain_timeout_s
        self.poll_s = poll_s
        self.draining = False
        self.began_at: Optional[float] = None  # time.monotonic()
        self.on_begin: Callable[[], None] = lambda: None
        self._sources: list[CallSource] = []
        self._goodbyes: list[Callable[[], int]] = []

    def add_calls(self, source: CallSource) -> None:
        """Have the drain end the calls ``source()`` lists (called at each poll)."""
        self._sources.append(source)

    def add_goodbyes(self, in_flight: Callable[[], int]) -> None:
        """Have the drain also wait while ``in_flight()`` is above 0 (the ended calls' goodbyes still
        unanswered, e.g. SIP BYEs), at most ``drain_timeout_s`` as for the units."""
        self._goodbyes.append(in_flight)

    def begin(self) -> bool:
        """Stop admitting now (synchronous: safe from a signal handler). True the first time."""
        if self.draining:
            return False
        self.draining = True
        self.began_at = time.monotonic()
        self.on_begin()
        return True

    def goodbyes_in_flight(self) -> int:
        """The goodbyes of ended calls still unanswered, over every :meth:`add_goodbyes` source."""
        return sum(in_flight() for in_flight in self._goodbyes)

    def live_calls(self) -> list[DrainableCall]:
        """The calls of every source that have not ended."""
        return [call for source in self._sources for call in source() if call.end_reason is None]

    async def drain(self, units: Iterable[PipelineUnit]) -> DrainReport:
        """Begin (if not yet), end every call as the module docstring says, then wait until each of
        ``units`` is idle and no goodbye is in flight (at most ``drain_timeout_s`` more). Returns the
        report; never raises for a call that fails to hang up."""
        self.begin()
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self.grace_s
        report = DrainReport()
        quiet: dict[str, int] = {}
        hangups: set[asyncio.Task[None]] = set()
        ending: set[str] = set()

        def end(call: DrainableCall, message: str) -> None:
            ending.add(call.id)
            context = contextvars.copy_context()
            context.run(bind_call, call.id)  # the hang-up's log lines name the call
            hangups.add(loop.create_task(call.hangup(EndReason.SERVER_SHUTDOWN, message), context=context))

        while True:
            calls = [call for call in self.live_calls() if call.id not in ending]
            if not calls:
                break
            if loop.time() >= deadline:
                for call in calls:
                    log.info("call %s still talking after the %.0f s grace period: ending it", call.id, self.grace_s)
                    end(call, GRACE_OVER_MESSAGE)
                    report.cut += 1
                break
            for call in calls:
                quiet[call.id] = 0 if hearing_answer(call.lease) else quiet.get(call.id, 0) + 1
                if quiet[call.id] >= _QUIET_POLLS:
                    end(call, SHUTDOWN_MESSAGE)
                    report.finished += 1
            await asyncio.sleep(self.poll_s)
        if hangups:
            await asyncio.gather(*hangups, return_exceptions=True)
        unit_list = list(units)
        for _ in range(max(1, int(self.drain_timeout_s / self.poll_s))):  # each drain is bounded by its own timer
            if all(unit.state is UnitState.IDLE for unit in unit_list) and not self.goodbyes_in_flight():
                break
            await asyncio.sleep(self.poll_s)
        report.units_not_idle = [unit.index for unit in unit_list if unit.state is not UnitState.IDLE]
        report.seconds = round(loop.time() - started, 3)
        return report
