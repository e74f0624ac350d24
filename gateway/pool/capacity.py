"""Admission by compute: whether this process can answer one more talking caller.

Every live call counts as a potential talker (a unit ``active``: claimed by a WebRTC call, a
WebSocket session or a SIP call, ringing included), since nobody is talking yet when callers
connect and all of them may talk a moment later. Two rules, both checked when a call is claimed
(:meth:`UnitPool.claim <gateway.pool.pool.UnitPool.claim>`) and, earlier, when an HTTP offer comes in:

1. the live calls are fewer than the talking capacity: the ``talking_capacity`` setting, else the
   estimate from the LLM's measured decode steps (``gateway.models.compute.decode_capacity``; engines
   without a batch decoder have none);
2. the LLM engine's queue is not saturated now (``ComputeLoad.saturated``: every batch slot runs,
   or turns wait already), the only rule for an engine without a measured capacity.

A call refused by either is a ``ComputeBusyError`` (``gateway.pool.pool``; HTTP 503
``compute_busy`` with ``Retry-After``, SIP 503): behind nginx the next process is tried. ``admit_by_compute`` off
disables both (only the pool size limits calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.models.base import LanguageModel
from gateway.models.compute.decode_capacity import talking_capacity
from gateway.models.compute.engine_queue import ComputeLoad, EngineQueue
from gateway.models.llama_cpp.batch import BatchDecoder


@dataclass(frozen=True)
class CapacityNow:
    """The compute admission at one moment: ``talkers`` live calls, the talking capacity ``limit``
    (None: no limit by count) and its ``source`` (``setting``, ``measured``, ``none``: an engine
    without step measurements, ``off``: ``admit_by_compute`` off), the decode step times it came
    from (``step_ms``: batch size -> ms; empty without a batch decoder) and the engine's queue
    (``compute``; None for an engine without one)."""

    talkers: int
    limit: Optional[int]
    source: str
    step_ms: dict[int, float]
    compute: Optional[ComputeLoad]

    def refusal(self) -> Optional[str]:
        """Why one more caller is refused now (a sentence), or None when one is admitted."""
        if self.source == "off":
            return None
        if self.limit is not None and self.talkers >= self.limit:
            return f"This process answers {self.limit} talking callers at once ({self.source}); {self.talkers} are live"
        if self.compute is not None and self.compute.saturated:
            load = self.compute
            return f"The model is busy answering {load.running} callers ({load.waiting} waiting)"
        return None

    def as_json(self) -> dict[str, Any]:
        """``{"talkers", "limit", "source", "step_ms": {"1": ms, ...}, "busy"}`` for ``GET /v1/pool``."""
        return {
            "talkers": self.talkers,
            "limit": self.limit,
            "source": self.source,
            "step_ms": {str(size): round(ms, 2) for size, ms in self.step_ms.items()},
            "busy": self.refusal() is not None,
        }


class TalkingCapacity:
    """The talking capacity of ``llm`` under ``config`` (``talking_capacity``, ``admit_by_compute``).

    ``llm`` may be wrapped (metered): its ``decoder`` (a BatchDecoder) and ``queue`` (an
    EngineQueue) are looked up on it; either may be absent."""

    def __init__(self, config: GatewayConfig, llm: LanguageModel) -> None:
        self.setting = config.talking_capacity
        self.enabled = config.admit_by_compute
        decoder = getattr(llm, "decoder", None)
        queue = getattr(llm, "queue", None)
        self._decoder = decoder if isinstance(decoder, BatchDecoder) else None
        self._queue = queue if isinstance(queue, EngineQueue) else None

    def now(self, talkers: int) -> CapacityNow:
        """The admission with ``talkers`` live calls (see :class:`CapacityNow`)."""
        step_ms = self._decoder.step_times.typical_ms() if self._decoder is not None else {}
        compute = self._queue.load() if self._queue is not None else None
        if not self.enabled:
            return CapacityNow(talkers, None, "off", step_ms, compute)
        if self.setting > 0:
            return CapacityNow(talkers, self.setting, "setting", step_ms, compute)
        if self._decoder is not None:
            limit = talking_capacity(step_ms, self._decoder.sequences)
            return CapacityNow(talkers, limit, "measured", step_ms, compute)
        return CapacityNow(talkers, None, "none", step_ms, compute)
