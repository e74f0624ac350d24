"""UnitPool: the fixed set of PipelineUnits built at start-up, and who may claim one: an idle unit
and, by measured load, room for one more conversation (:mod:`gateway.pool.capacity`,
:mod:`gateway.pool.load`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Optional

from gateway.config import GatewayConfig
from gateway.media.playout import SAMPLE_RATE
from gateway.models.base import ModelSet
from gateway.models.compute.core_use import CORE_USE
from gateway.pipeline.chain import StageFactory
from gateway.pool.capacity import Admission, CapacityNow
from gateway.pool.lease import UnitLease
from gateway.pool.load import TALK_WINDOW_S, TICK_S, LoadMeter
from gateway.pool.unit import EventSink, PipelineUnit, UnitState


class PoolFullError(RuntimeError):
    """Every unit is active, draining or stuck; the offer is refused (HTTP 503), never queued.
    ``code``: the error code of the refusal; ``retry_after_s``: when it is expected to clear (s;
    None: not known, the configured ``Retry-After`` stands)."""

    code = "pool_full"
    retry_after_s: Optional[float] = None


class ComputeBusyError(PoolFullError):
    """Units are free but the compute is not: one more talking caller could not be answered within
    the target (:mod:`gateway.pool.capacity`); refused like a full pool, with its own ``code``."""

    code = "compute_busy"

    def __init__(self, reason: str, retry_after_s: Optional[float] = None) -> None:
        super().__init__(reason)
        self.retry_after_s = retry_after_s


class UnitPool:
    """``size`` units sharing one :class:`ModelSet`. Claims are synchronous and atomic."""

    def __init__(
        self,
        models: ModelSet,
        config: GatewayConfig,
        loop: Optional[asyncio.AbstractEventLoop] = None,
        stage_factories: Optional[dict[str, StageFactory]] = None,
    ) -> None:
        self.config = config
        loop = loop or asyncio.get_running_loop()
        self.units = [PipelineUnit(i, models, config, loop, stage_factories) for i in range(config.pool_size)]
        self.meter = LoadMeter(
            live=lambda: self.count(UnitState.ACTIVE),
            talking=self.talking,
            misses=self._misses,
            lone_step_ms=lambda: self.capacity.step_ms().get(1),
            llm_busy_s=lambda: self.capacity.llm_busy_s() if hasattr(self, "capacity") else None,  # set below
            llm_wall_s=lambda: self.capacity.llm_wall_s() if hasattr(self, "capacity") else None,
        )
        self.capacity = Admission(config, models.llm, self.meter)
        self.on_state_change: Callable[[PipelineUnit], None] = lambda unit: None
        self.on_recovery: Callable[[PipelineUnit], None] = lambda unit: None  # a stuck unit rebuilt (metrics)
        for unit in self.units:
            unit.on_state_change = self._state_changed
            unit.on_recovery = lambda u: self.on_recovery(u)
            unit.replying_elsewhere = self._replying_besides(unit)
            unit.on_first_audio = self.meter.first_audio
        self._ticker: Optional[asyncio.TimerHandle] = loop.call_later(TICK_S, self._tick, loop)

    def _replying_besides(self, unit: PipelineUnit) -> Callable[[], int]:
        """How many units other than ``unit`` write a reply now (a callable for ``unit``)."""
        return lambda: sum(1 for other in self.units if other is not unit and other.scope.live)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sample the load every second (CPU over a window needs samples while nobody asks)."""
        self.meter.tick()
        self._ticker = loop.call_later(TICK_S, self._tick, loop)

    def talking(self) -> int:
        """Live calls with a turn (caller speech or a response) in the last ``TALK_WINDOW_S``, or a
        reply being written now."""
        now = time.monotonic()
        return sum(
            1
            for unit in self.units
            if unit.state is UnitState.ACTIVE
            and (unit.scope.live or now - (unit.call_state.last_turn or -TALK_WINDOW_S - 1) <= TALK_WINDOW_S)
        )

    def _misses(self) -> tuple[int, float]:
        """Every unit's playout underruns so far: (count, seconds of silence inside replies)."""
        count = sum(unit.playout.underruns for unit in self.units)
        samples = sum(unit.playout.underrun_samples for unit in self.units)
        return count, samples / SAMPLE_RATE

    def _state_changed(self, unit: PipelineUnit) -> None:
        # The LLM's threads: calls being served (a draining unit's stages are counted by their work).
        CORE_USE.calls = sum(1 for u in self.units if u.state is UnitState.ACTIVE)
        self.on_state_change(unit)

    def claim(self, call_id: str, sink: EventSink) -> UnitLease:
        """An idle unit now bound to ``call_id``, as the call's lease (inert once released); raises
        what :meth:`refusal` gives, if anything. Synchronous: nothing runs between check and set."""
        refused = self.refusal()
        if refused is not None:
            raise refused
        for unit in self.units:
            if unit.claim(call_id, sink):
                return UnitLease(unit, call_id)
        raise PoolFullError(f"All lines are busy (all {len(self.units)} units are in use)")

    def refusal(self) -> Optional[PoolFullError]:
        """Why a call would be refused now: PoolFullError when no unit is idle, else
        ComputeBusyError when the measured load admits no more conversations (:meth:`capacity_now`);
        None when a claim would succeed."""
        if self.count(UnitState.IDLE) == 0:
            return PoolFullError(f"All lines are busy (all {len(self.units)} units are in use)")
        capacity = self.capacity_now()
        reason = capacity.refusal()
        return ComputeBusyError(reason, capacity.retry_after_s()) if reason is not None else None

    def count(self, state: UnitState) -> int:
        """Units now in ``state``; read without locks, so a moment's view for /v1/pool and metrics."""
        return sum(1 for unit in self.units if unit.state is state)

    def capacity_now(self) -> CapacityNow:
        """The admission by compute now (:class:`~gateway.pool.capacity.Admission`)."""
        return self.capacity.now()

    def snapshot(self) -> dict:
        """The body of ``GET /v1/pool``."""
        units = [unit.snapshot() for unit in self.units]
        totals = {state.value: self.count(state) for state in UnitState}
        return {
            "size": len(self.units),
            "in_use": len(self.units) - totals["idle"],
            "totals": totals,
            "recoveries": sum(unit.recoveries for unit in self.units),
            "units": units,
        }

    def close(self, timeout: float = 10.0) -> bool:
        """Stop every unit's stage threads and wait up to ``timeout`` s for them (blocking)."""
        CORE_USE.calls = 0
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for unit in self.units:
            unit.close()
        return all([unit.join(timeout) for unit in self.units])
