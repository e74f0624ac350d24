"""UnitPool: the fixed set of PipelineUnits built at start-up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Optional

from gateway.config import GatewayConfig
from gateway.models.base import ModelSet
from gateway.pipeline.chain import StageFactory
from gateway.pool.lease import UnitLease
from gateway.pool.unit import EventSink, PipelineUnit, UnitState


class PoolFullError(RuntimeError):
    """Every unit is active, draining or stuck; the offer is refused (HTTP 503), never queued."""


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
        self.on_state_change: Callable[[PipelineUnit], None] = lambda unit: None
        self.on_recovery: Callable[[PipelineUnit], None] = lambda unit: None  # a stuck unit rebuilt (metrics)
        for unit in self.units:
            unit.on_state_change = lambda u: self.on_state_change(u)
            unit.on_recovery = lambda u: self.on_recovery(u)

    def claim(self, call_id: str, sink: EventSink) -> UnitLease:
        """An idle unit now bound to ``call_id``, as the call's lease (inert once released);
        raises PoolFullError if there is none. Synchronous: nothing runs between check and set."""
        for unit in self.units:
            if unit.claim(call_id, sink):
                return UnitLease(unit, call_id)
        raise PoolFullError(f"all {len(self.units)} units are busy")

    def count(self, state: UnitState) -> int:
        """Units now in ``state``; read without locks, so a moment's view for /v1/pool and metrics."""
        return sum(1 for unit in self.units if unit.state is state)

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
        for unit in self.units:
            unit.close()
        return all([unit.join(timeout) for unit in self.units])
