"""Admission by measured load: whether this process takes one more conversation now.

A call costs what its turns cost: a caller who only listens or says nothing takes almost no
compute, a talking one the speech models and the LLM for each turn (most of it while the reply
plays: its later tokens are paced, ``gateway.pipeline.pacing``). So admission does not count live
calls; it reads the measured load (:mod:`gateway.pool.load`: CPU, deadline misses, first-clause
latency of recent turns, the talking calls and what one costs) and refuses a new call when

1. **this process is saturated**: its busy cores over the window reach :data:`SATURATED` of the
   cores it may use (other processes on a shared host do not count: their CPU is shown as
   ``box_cores``, not decided on);
2. **replies miss their deadlines**: :data:`MISS_LIMIT` or more replies ran dry in the window;
3. **first clauses are slow**: the window's p90 first clause (3 turns at least) is over
   :data:`FIRST_CLAUSE_LIMIT` times the lone reference (a turn on a quiet box);
4. **one more talker would not fit**: (talking calls + 1) x the cost of a call is over
   :data:`CPU_TARGET` of the cores (the newcomer is expected to talk; once admitted, it is counted
   as talking only when it does). With nobody talking, one more conversation always fits: an
   estimate never refuses the only talker of a box that rules 1-3 find idle;
5. **one more talker would not fit the LLM**: (talking calls + 1) x the LLM share of a call is over
   :data:`LLM_TARGET` of its step thread (an engine with a batched decoder). The LLM writes on one
   thread while callers talk, and every first clause queues behind its steps: latency, not busy
   cores, is what runs out first (docs/BENCHMARKS.md, "Calls per box", issue 28). With nobody
   talking, one more conversation always fits the LLM.

With **no call live** nothing is refused: the window's slow turns, misses and busy cores describe
calls that have ended, and an idle gateway that told a lone caller to retry for up to 30 s would be
down for nothing (behind nginx, every process alike).

A burst of turns beyond what the compute answers at once queues by deadline (first clauses first)
rather than being refused; the rules read windows of 30 s, not the queue of the moment. The
estimate of conversations that fit (``calls_fit``: the fewer of CPU_TARGET x cores / cost of a
call and LLM_TARGET / the LLM share of a call) and the ``load`` (1.0: full) are an autoscaler's
signal (``/v1/pool``, ``/metrics``).

``talking_capacity`` set (> 0) replaces the measurement: live calls up to it (source ``setting``);
``admit_by_compute`` off disables admission by compute (only the pool size limits calls). A call
refused here is a ``ComputeBusyError`` (``gateway.pool.pool``): HTTP 503 ``compute_busy`` with
``Retry-After``, SIP 503; behind nginx the next process is tried. Checked when a call is claimed
(:meth:`UnitPool.claim <gateway.pool.pool.UnitPool.claim>`) and, earlier, when an offer comes in
(``gateway.transports.door.Door.refuse_if_busy``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.models.base import LanguageModel
from gateway.models.compute.engine_queue import ComputeLoad, EngineQueue
from gateway.models.llama_cpp.batch import BatchDecoder
from gateway.pool.load import WINDOW_S, Load, LoadMeter, p90

SATURATED = 0.95  # busy share of the cores at which the box takes no new call
MISS_LIMIT = 2  # replies that ran dry in the window at which no new call is taken
FIRST_CLAUSE_LIMIT = 1.75  # p90 first clause over the lone one at which no new call is taken
CPU_TARGET = 0.85  # share of the cores talking calls may be expected to take
# Share of the LLM's step thread talking calls may be expected to take: set from this box's
# numbers (docs/BENCHMARKS.md, "Calls per box"): 3 talking conversations at 1.8-1.9x the lone
# median, 2 within the bound; one costs ~0.35-0.45 of the thread at 7.5 tok/s.
LLM_TARGET = 0.9


def refusal(load: Load) -> Optional[str]:
    """Why one more conversation does not fit ``load`` (a sentence), or None when it does (always
    when no call is live)."""
    if load.live == 0:
        return None
    if load.cpu_cores >= SATURATED * load.cores:
        return f"This process is busy ({load.cpu_cores:.1f} of its {load.cores} cores over the last 30 s)"
    if load.misses >= MISS_LIMIT:
        return f"{load.misses} replies ran out of audio in the last 30 s"
    if load.first_clause_ms is not None and load.reference_ms:
        ratio = load.first_clause_ms / load.reference_ms
        if ratio > FIRST_CLAUSE_LIMIT:
            return f"Answers start {ratio:.1f}x later than on a quiet box"
    if load.talking and (load.talking + 1) * load.call_cost > CPU_TARGET * load.cores:
        return (
            f"{load.talking} talking callers at {load.call_cost:.2f} cores each leave no room for another "
            f"({load.cores} cores)"
        )
    if load.llm_cost is not None and load.talking and (load.talking + 1) * load.llm_cost > LLM_TARGET:
        return f"{load.talking} talking callers at {load.llm_cost:.0%} of the LLM's time each leave no room for another"
    return None


def clears_in_s(load: Load) -> Optional[float]:
    """How long, s, until the window rules that refuse ``load`` now (2: misses, 3: slow first
    clauses) stop refusing it if no new miss or slow turn comes: their oldest misses and turns
    leave the window. None when neither refuses (the CPU and talker rules clear as soon as the
    load or a talker goes, which the meter cannot foresee)."""
    waits = [0.0]
    if load.misses >= MISS_LIMIT and len(load.miss_ages_s) >= MISS_LIMIT:
        oldest_first = sorted(load.miss_ages_s, reverse=True)
        waits.append(WINDOW_S - oldest_first[len(oldest_first) - MISS_LIMIT])
    if load.first_clause_ms is not None and load.reference_ms:
        turns = sorted(load.turn_ages_s, reverse=True)
        for dropped in range(len(turns)):
            left = [ms for _, ms in turns[dropped:]]
            if len(left) < 3 or p90(left) <= FIRST_CLAUSE_LIMIT * load.reference_ms:
                if dropped:
                    waits.append(WINDOW_S - turns[dropped - 1][0])
                break
    wait = max(waits)
    return wait if wait > 0 else None


def calls_fit(load: Load) -> int:
    """Talking conversations the box is estimated to carry (at least 1): the fewer that fit the
    cores and the LLM's thread."""
    fit = CPU_TARGET * load.cores / max(load.call_cost, 1e-3)
    if load.llm_cost is not None:
        fit = min(fit, LLM_TARGET / max(load.llm_cost, 1e-3))
    return max(1, math.floor(fit + 1e-9))


def load_share(load: Load) -> float:
    """How full this process is, 1.0 at the target: the largest of its measured busy cores and the
    talking calls' expected cost over CPU_TARGET of the cores it may use, and the LLM's measured
    share and the talking calls' expected share over LLM_TARGET."""
    share = max(load.cpu_cores, load.talking * load.call_cost) / (CPU_TARGET * load.cores)
    if load.llm_cost is not None:
        share = max(share, max(load.llm_share or 0.0, load.talking * load.llm_cost) / LLM_TARGET)
    return share


@dataclass(frozen=True)
class CapacityNow:
    """The admission at one moment: its ``source`` (``measured``, ``setting``: the
    ``talking_capacity`` cap on live calls, ``off``: ``admit_by_compute`` off), ``limit`` (the
    setting, or the conversations estimated to fit), the measured ``load``, the LLM's decode step
    times (``step_ms``: batch size -> ms; empty without a batch decoder), its queue (``compute``;
    None for an engine without one) and ``reason``, why a new call is refused (None: admitted)."""

    source: str
    limit: Optional[int]
    load: Load
    step_ms: dict[int, float]
    compute: Optional[ComputeLoad]
    reason: Optional[str]

    def refusal(self) -> Optional[str]:
        """Why one more caller is refused now (a sentence), or None when one is admitted."""
        return self.reason

    def retry_after_s(self) -> Optional[float]:
        """When a refused caller may expect to be admitted, s (:func:`clears_in_s`), or None when
        that is not known (nor refused): the configured ``Retry-After`` then stands."""
        return clears_in_s(self.load) if self.reason is not None and self.source == "measured" else None

    def as_json(self) -> dict[str, Any]:
        """The ``capacity`` of ``GET /v1/pool``: ``source``, ``limit``, ``busy``, ``reason``,
        ``retry_after_s`` (when a refusal is expected to clear, None: unknown), the
        calls (``live``, ``talkers``: talking now), the estimate (``calls_fit``,
        ``call_cost_cores``, ``call_cost_llm``: the LLM share of one, ``load``: 1.0 full), the
        measurements (``cpu_cores`` of this process, ``box_cores`` of the whole machine: other
        processes too, not decided on, ``cores`` this process may use, ``llm_share``: of the window
        the LLM's step thread computed (wall time, 0 to 1), None without a batched decoder as ``call_cost_llm``,
        ``misses`` and ``missed_s`` in the window, ``turns``, ``first_clause_ms`` p90 and
        ``reference_ms``) and ``step_ms`` by batch size."""
        load, retry_after_s = self.load, self.retry_after_s()
        return {
            "source": self.source,
            "limit": self.limit,
            "busy": self.reason is not None,
            "reason": self.reason,
            "retry_after_s": None if retry_after_s is None else round(retry_after_s, 1),
            "live": load.live,
            "talkers": load.talking,
            "calls_fit": calls_fit(load),
            "call_cost_cores": round(load.call_cost, 3),
            "call_cost_llm": None if load.llm_cost is None else round(load.llm_cost, 3),
            "llm_share": None if load.llm_share is None else round(load.llm_share, 3),
            "load": round(load_share(load), 3),
            "cpu_cores": round(load.cpu_cores, 3),
            "box_cores": round(load.box_cores, 3),
            "cores": load.cores,
            "misses": load.misses,
            "missed_s": round(load.missed_s, 3),
            "turns": load.turns,
            "first_clause_ms": None if load.first_clause_ms is None else round(load.first_clause_ms),
            "reference_ms": None if load.reference_ms is None else round(load.reference_ms),
            "step_ms": {str(size): round(ms, 2) for size, ms in self.step_ms.items()},
        }


class Admission:
    """Admission by compute for ``llm`` under ``config`` (``talking_capacity``, ``admit_by_compute``),
    from ``meter``'s measurements. ``llm`` may be wrapped (metered): its ``decoder`` (a BatchDecoder:
    the decode step times, the prior cost of a call) and ``queue`` (an EngineQueue) are looked up
    on it; either may be absent."""

    def __init__(self, config: GatewayConfig, llm: LanguageModel, meter: LoadMeter) -> None:
        self.setting = config.talking_capacity
        self.enabled = config.admit_by_compute
        self.meter = meter
        decoder = getattr(llm, "decoder", None)
        queue = getattr(llm, "queue", None)
        self._decoder = decoder if isinstance(decoder, BatchDecoder) else None
        self._queue = queue if isinstance(queue, EngineQueue) else None

    def llm_busy_s(self) -> Optional[float]:
        """Seconds the LLM's batched decoder computed work a turn waits for so far (its ``busy_s``:
        speculative steps not counted; a lone call's steps on both cores count twice, as thread
        time of the busy setting); None without one."""
        return self._decoder.busy_s if self._decoder is not None else None

    def llm_wall_s(self) -> Optional[float]:
        """The same seconds as wall time (its ``busy_wall_s``); None without a batched decoder."""
        return self._decoder.busy_wall_s if self._decoder is not None else None

    def step_ms(self) -> dict[int, float]:
        """The LLM's typical decode step by batch size, ms (empty without a batch decoder)."""
        return self._decoder.step_times.typical_ms() if self._decoder is not None else {}

    def now(self) -> CapacityNow:
        """The admission now (see :class:`CapacityNow`)."""
        load = self.meter.load()
        compute = self._queue.load() if self._queue is not None else None
        step_ms = self.step_ms()
        if not self.enabled:
            return CapacityNow("off", None, load, step_ms, compute, None)
        if self.setting > 0:
            full = load.live >= self.setting
            reason = f"This process answers {self.setting} calls at once (setting); {load.live} are live"
            return CapacityNow("setting", self.setting, load, step_ms, compute, reason if full else None)
        return CapacityNow("measured", calls_fit(load), load, step_ms, compute, refusal(load))
