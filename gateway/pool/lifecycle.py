"""The lifecycle of one pooled unit, apart from what it runs: :class:`UnitState` and
:class:`UnitLifecycle` (claim, quarantine-drain, stuck recovery).

``idle`` --claim--> ``active`` --begin_drain--> ``draining`` --its own CallEnd marker out of the
last stage--> ``idle``. A drain that exceeds ``drain_timeout_s`` quarantines the unit (``stuck``): its
stage threads and queues are replaced and a probe marker is run through the new ones; when it comes
out the unit is ``idle`` again. A marker of an earlier call never releases a later one.

:class:`UnitLifecycle` holds the state, the lock and the drain timer; the unit (``PipelineUnit``)
provides the stage side through six hooks (``_on_claim``, ``_stop_call``, ``_send_marker``,
``_on_released``, ``_rebuild``, ``_retire``), and two for :meth:`UnitLifecycle.snapshot`
(``_claimed_at``, ``_stage_view``). ``claim`` and ``begin_drain`` run on the event loop,
``_marker_out`` on the last stage's thread.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.pipeline.messages import CallEnd

log = logging.getLogger(__name__)


class UnitState(enum.StrEnum):
    """A unit's lifecycle state; the value is what ``GET /v1/pool`` and ``vg_pool_units`` show.

    ``idle``: free, the only state a call can claim. ``active``: serving a call. ``draining``: the
    call ended and its CallEnd marker is passing the stages. ``stuck``: the drain overran
    ``drain_timeout_s``; stage threads are being rebuilt, and the unit is ``idle`` after.
    """

    IDLE = "idle"
    ACTIVE = "active"
    DRAINING = "draining"
    STUCK = "stuck"


class UnitLifecycle:
    """The state machine of the module docstring, for the unit ``index`` of a pool.
    ``on_state_change(unit)`` runs on the event loop after each change, ``on_recovery(unit)`` at each
    rebuild of a stuck unit (metrics)."""

    def __init__(self, index: int, config: GatewayConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.index = index
        self.config = config
        self._loop = loop
        self._lock = threading.Lock()
        self.state = UnitState.IDLE
        self.call_id: Optional[str] = None
        self._drain_token: Optional[str] = None
        self._drain_timer: Optional[asyncio.TimerHandle] = None
        self.drain_started_at: Optional[float] = None
        self.stuck_since: Optional[float] = None
        self.close_reason: Optional[str] = None
        self.recoveries = 0
        self.sessions_served = 0
        self.on_state_change: Callable[[Any], None] = lambda unit: None
        self.on_recovery: Callable[[Any], None] = lambda unit: None

    # ----- the stage side (the unit's) -----
    def _on_claim(self, call_id: str, sink: Any) -> None:
        """Under the lock: fresh call state for ``call_id``, nothing earlier live, ``sink`` bound."""
        raise NotImplementedError

    def _stop_call(self, under_lock: bool) -> None:
        """Drain begins. ``under_lock`` True: unbind the sink; False (after): cancel, drop reply
        audio, flush the queues."""
        raise NotImplementedError

    def _send_marker(self, token: str) -> None:
        """Send a CallEnd marker with ``token`` through every stage."""
        raise NotImplementedError

    def _on_released(self, under_lock: bool) -> None:
        """The unit is idle again. ``under_lock`` True: reset the call state; False: drop audio."""
        raise NotImplementedError

    def _rebuild(self) -> None:
        """Retire the stage threads and queues and build new ones."""
        raise NotImplementedError

    def _retire(self) -> None:
        """Tell the stage threads to stop (process shutdown)."""
        raise NotImplementedError

    def _claimed_at(self) -> tuple[float, float]:
        """When the call was claimed: (Unix s, monotonic s)."""
        raise NotImplementedError

    def _stage_view(self) -> dict:
        """The stage side's keys of :meth:`snapshot`: ``queued``, ``playout_ms``."""
        raise NotImplementedError

    # ----- transitions -----
    def claim(self, call_id: str, sink: Any) -> bool:
        """Take this unit for a new call if it is idle. Synchronous: nothing can run between the
        check and the set."""
        with self._lock:
            if self.state is not UnitState.IDLE:
                return False
            self.state = UnitState.ACTIVE
            self.call_id = call_id
            self._on_claim(call_id, sink)
            self.close_reason = None
            self.sessions_served += 1
        self.on_state_change(self)
        return True

    def begin_drain(self, reason: str) -> bool:
        """Quarantine-drain: stop taking input, cancel, flush, send a CallEnd marker through every stage.

        Returns False if the unit was not active (a second hang-up of the same call is harmless).
        """
        with self._lock:
            if self.state is not UnitState.ACTIVE:
                return False
            self.state = UnitState.DRAINING
            self.close_reason = reason
            self._stop_call(under_lock=True)
            token = self._drain_token = self.call_id or ""  # an active unit always has a call id
            self.drain_started_at = time.monotonic()
        self._stop_call(under_lock=False)
        self._send_marker(token)
        self._arm_drain_timer(token)
        self.on_state_change(self)
        return True

    def _arm_drain_timer(self, token: str) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        self._drain_timer = self._loop.call_later(self.config.drain_timeout_s, self._drain_timed_out, token)

    def _marker_out(self, marker: CallEnd) -> None:
        """The last stage passed on a CallEnd marker (TTS thread)."""
        with self._lock:
            if self.state not in (UnitState.DRAINING, UnitState.STUCK) or marker.call_id != self._drain_token:
                return  # a marker of an earlier call never releases a later one
            self.state = UnitState.IDLE
            self.call_id = None
            self._on_released(under_lock=True)
            self._drain_token = None
            self.drain_started_at = None
            self.stuck_since = None
        self._on_released(under_lock=False)
        self._loop.call_soon_threadsafe(self._after_idle)

    def _after_idle(self) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        self.on_state_change(self)

    def _drain_timed_out(self, token: str) -> None:
        with self._lock:
            if self._drain_token != token or self.state not in (UnitState.DRAINING, UnitState.STUCK):
                return
            if self.state is UnitState.DRAINING:
                self.stuck_since = time.monotonic()
            self.state = UnitState.STUCK
        log.warning("unit %d did not drain in %.1f s: quarantined, rebuilding", self.index, self.config.drain_timeout_s)
        self.on_state_change(self)
        self._recover()

    def _recover(self) -> None:
        """Replace the stage threads and queues; the unit is idle once a probe marker passes them all.

        The old threads are retired: whatever they are blocked in, their output goes to queues no
        one reads, and audio of their generation is stale.
        """
        self.recoveries += 1
        self.on_recovery(self)
        self._rebuild()
        token = f"recover-{uuid.uuid4().hex[:8]}"
        with self._lock:
            self._drain_token = token
        self._send_marker(token)
        self._arm_drain_timer(token)

    def close(self) -> None:
        """Tell the stage threads to stop (process shutdown). A drain still under way is not timed
        out later (no quarantine, no rebuild: the threads are going)."""
        timer, self._drain_timer = self._drain_timer, None
        if timer is not None:
            try:
                self._loop.call_soon_threadsafe(timer.cancel)  # close() may run in a worker thread
            except RuntimeError:
                pass  # the loop is closed: the timer will never fire
        self._retire()

    # ----- observability -----
    def snapshot(self) -> dict:
        """This unit's entry in ``GET /v1/pool`` ``units``; read without the lock (a moment's view).

        Keys: ``index``; ``state`` (a UnitState value); ``call_id`` (None when idle or stuck);
        ``claimed_at`` (Unix s) and ``active_for_s`` while active; ``draining_for_s`` and
        ``stuck_for_s`` in those states (else None); ``close_reason``; ``sessions_served``;
        ``recoveries``; ``queued`` (messages waiting at VAD, STT, LLM, TTS); ``playout_ms`` (reply
        audio buffered, ms). Durations are seconds rounded to 1 ms.
        """
        now = time.monotonic()
        active = self.state is UnitState.ACTIVE
        claimed_epoch, claimed = self._claimed_at()
        return {
            "index": self.index,
            "state": self.state.value,
            "call_id": self.call_id if self.state is not UnitState.STUCK else None,
            "claimed_at": claimed_epoch if active else None,
            "active_for_s": round(now - claimed, 3) if active else None,
            "draining_for_s": round(now - self.drain_started_at, 3)
            if self.state is UnitState.DRAINING and self.drain_started_at
            else None,
            "stuck_for_s": round(now - self.stuck_since, 3)
            if self.state is UnitState.STUCK and self.stuck_since
            else None,
            "close_reason": self.close_reason,
            "sessions_served": self.sessions_served,
            "recoveries": self.recoveries,
            **self._stage_view(),
        }
