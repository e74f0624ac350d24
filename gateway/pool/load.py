"""What the calls of this process cost now: the measurements admission decides on
(:mod:`gateway.pool.capacity`), taken over the last :data:`WINDOW_S` seconds.

- **CPU**: this process's CPU (``os.times``: the gateway starts no model server of its own) against
  the cores it may use (:func:`usable_cores`: its CPU affinity, within a cgroup's CPU quota), sampled
  every second. The whole machine's busy cores (``/proc/stat``, where there is one) are kept beside
  it as a secondary figure only: on a shared host (a CI runner, other services) another process's
  CPU is not this process's load, and admission decides on this process's;
- **deadline misses**: replies whose audio ran dry before their end (the units' playout
  underruns, ``gateway.media.playout``), counted and in seconds of silence;
- **first-clause latency** of the turns answered in the window: the end of the caller's turn to
  the first frame of the answer, and a lone reference: the median of the last turns asked while
  no other reply was being written (a quiet box);
- the window restarts whenever no call is live: what it held was of calls that ended;
- **talking calls**: live calls with a turn (speech or a response) in the last
  :data:`TALK_WINDOW_S`; a silent or only listening caller is live but not talking;
- **the cost of a call**: the cores one talking conversation takes on average (its listening
  included), an exponential average of (process CPU - idle) / talking calls, seeded by a prior
  from the LLM's lone decode step (:func:`prior_call_cost`) until calls have been measured, and
  going back to that prior (the same time constant) while nobody talks: a cost learned in a busy
  phase lasts only as long as its evidence;
- **the LLM's load** (an engine with a batched decoder): the share of the time its step thread
  computes work a turn waits for (``llm_share``, wall time: 0 to 1.0, 1.0: it never rests;
  ``BatchDecoder.busy_wall_s``; read-aheads and preemptive replies held unadopted give way to any
  turn and are not counted: ``BatchDecoder.yielding_s``) and the share one talking conversation
  takes (``llm_cost``: an exponential average of the thread time per talking call, seeded by
  :func:`prior_llm_cost` and going back to it while nobody talks; thread time of the busy setting,
  ``BatchDecoder.busy_s``: a lone call's steps on ``llm_idle_threads`` count their threads, as
  that call beside others would take the busy setting's one thread longer). The LLM runs on one thread
  while callers talk (the other cores serve the speech models), so it is what latency runs out of
  first: CPU counted in cores says a 2-core
  box has room while the LLM's thread is already the queue every first clause waits in.

Thread use: :meth:`LoadMeter.tick` on the event loop (the pool's timer) and from any thread that
reads the load; :meth:`LoadMeter.first_audio` from the event loop. All under one lock.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

WINDOW_S = 30.0  # the measurements look this far back, s
TALK_WINDOW_S = 30.0  # a live call with a turn this recent is talking, s
COST_TAU_S = 60.0  # the time constant of the call cost's average, s
REFERENCE_TURNS = 20  # quiet turns kept for the lone reference
TICK_S = 1.0
# The prior cost of a conversation before any is measured: a reply of REPLY_TOKENS on one thread
# (prompt and speech models beside it: x PRIOR_OVERHEAD) every TURN_CYCLE_S of conversation.
REPLY_TOKENS = 60
PRIOR_OVERHEAD = 1.6
TURN_CYCLE_S = 25.0
LLM_PRIOR_OVERHEAD = 1.2  # the prompt's read beside the reply's decode, on the LLM's thread
LLM_SATURATED = 0.9  # share of a tick the LLM computed at which it is taken as saturated


def prior_call_cost(lone_step_ms: Optional[float], cores: int) -> float:
    """Cores a conversation is expected to take before any is measured, from the LLM's lone decode
    step (ms; None: unknown, a quarter of a core); between 0.05 and ``cores``."""
    if not lone_step_ms:
        return 0.25
    cost = REPLY_TOKENS * lone_step_ms / 1000 * PRIOR_OVERHEAD / TURN_CYCLE_S
    return min(float(cores), max(0.05, cost))


def usable_cores(cgroup: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The cores this process may use: its CPU affinity (``os.sched_getaffinity``; the CPU count
    where there is none), at most a cgroup v2 CPU quota rounded up (``cgroup``: ``"max 100000"``
    is none, ``"150000 100000"`` is 1.5 cores: 2); at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = cgroup.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(float(quota) / float(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def prior_llm_cost(lone_step_ms: Optional[float]) -> Optional[float]:
    """The share of the LLM's step thread one talking conversation is expected to take before any
    is measured, from the lone decode step (ms; None: no batched decoder, no estimate): a reply of
    :data:`REPLY_TOKENS` and its prompt (x :data:`LLM_PRIOR_OVERHEAD`) every :data:`TURN_CYCLE_S`."""
    if not lone_step_ms:
        return None
    return min(1.0, REPLY_TOKENS * lone_step_ms / 1000 * LLM_PRIOR_OVERHEAD / TURN_CYCLE_S)


@dataclass(frozen=True)
class Load:
    """The measurements at one moment (see the module docstring): ``live`` and ``talking`` calls,
    ``cores`` this process may use, ``cpu_cores`` (this process: what admission reads) and
    ``box_cores`` (the whole machine, all its CPUs: other processes included; a secondary figure)
    busy on average over the window, deadline ``misses`` and ``missed_s`` in it, the p90 ``first_clause_ms``
    of its ``turns`` (None under 3) and the lone ``reference_ms`` (None before a quiet turn),
    ``call_cost`` (cores per talking call), the misses since the start (``misses_total``,
    ``missed_total_s``), and the LLM's load (None without a batched decoder): ``llm_share`` of
    the window its step thread computed (wall time, at most 1.0), ``llm_cost`` the share per
    talking call (thread time of the busy setting); when the window's
    misses and turns happened, for how long they still count (``miss_ages_s``: each miss's age, s,
    oldest first; ``turn_ages_s``: (age s, first clause ms) of each turn, oldest first)."""

    live: int
    talking: int
    cores: int
    cpu_cores: float
    box_cores: float
    misses: int
    missed_s: float
    turns: int
    first_clause_ms: Optional[float]
    reference_ms: Optional[float]
    call_cost: float
    misses_total: int = 0
    missed_total_s: float = 0.0
    llm_share: Optional[float] = None
    llm_cost: Optional[float] = None
    miss_ages_s: tuple[float, ...] = ()
    turn_ages_s: tuple[tuple[float, float], ...] = ()


class _BoxCpu:
    """Busy and total jiffies of the whole machine from ``/proc/stat`` (None where it is absent)."""

    path = Path("/proc/stat")

    def read(self) -> Optional[tuple[float, float]]:
        try:
            fields = [float(v) for v in self.path.read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError, IndexError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
        return sum(fields) - idle, sum(fields)


@dataclass
class _Sample:
    at: float
    cpu_s: float  # this process's user + system seconds
    box: Optional[tuple[float, float]]  # the machine's (busy, total) jiffies
    underruns: int
    underrun_s: float
    llm_s: Optional[float]  # the LLM's step thread's compute seconds so far, as thread time (None: no batched decoder)
    llm_wall_s: Optional[float]  # the same as wall seconds


class LoadMeter:
    """The load of the calls served by the units: ``live()`` and ``talking()`` count them,
    ``misses()`` gives the units' (underruns, seconds of underrun) so far, ``lone_step_ms()`` the
    LLM's lone decode step (for the prior cost), ``llm_busy_s()`` the seconds the LLM's step
    thread computed so far as thread time of the busy setting (None: no batched decoder) and
    ``llm_wall_s()`` the same as wall seconds (None: ``llm_busy_s`` is wall time too).
    ``cores``: the cores this process may use (default :func:`usable_cores`); ``box_cpus``: the
    machine's CPUs (default ``os.cpu_count()``).
    ``clock``, ``cpu_s`` (this process's CPU seconds) and ``box`` (the machine's busy and total
    jiffies, or None) are the system's unless given (tests give their own)."""

    def __init__(
        self,
        live: Callable[[], int],
        talking: Callable[[], int],
        misses: Callable[[], tuple[int, float]],
        lone_step_ms: Callable[[], Optional[float]] = lambda: None,
        llm_busy_s: Callable[[], Optional[float]] = lambda: None,
        llm_wall_s: Callable[[], Optional[float]] = lambda: None,
        cores: Optional[int] = None,
        clock: Callable[[], float] = time.monotonic,
        cpu_s: Optional[Callable[[], float]] = None,
        box: Optional[Callable[[], Optional[tuple[float, float]]]] = None,
        box_cpus: Optional[int] = None,
    ) -> None:
        self._live, self._talking, self._misses, self._lone_step_ms = live, talking, misses, lone_step_ms
        self._llm_busy_s = llm_busy_s
        self._llm_wall_s = llm_wall_s
        self.cores = cores or usable_cores()
        self.box_cpus = box_cpus or os.cpu_count() or self.cores
        self._clock = clock
        self._cpu_s = cpu_s or _process_cpu_s
        self._box = box or _BoxCpu().read
        self._lock = threading.Lock()
        self._samples: deque[_Sample] = deque()
        self._turns: deque[tuple[float, float]] = deque()  # (answered at, first clause ms)
        self._quiet: deque[float] = deque(maxlen=REFERENCE_TURNS)  # first clause ms of quiet turns
        self._cost: Optional[float] = None  # measured cores per talking call (None: none yet)
        self._llm_cost: Optional[float] = None  # measured LLM share per talking call (None: none yet)
        self._idle = 0.02  # cores this process takes with no call (media loops, timers)
        self.tick()

    def first_audio(self, first_clause_s: float, quiet: bool) -> None:
        """A turn's answer started to play ``first_clause_s`` after the caller's turn ended;
        ``quiet``: no other reply was being written when it was asked."""
        now = self._clock()
        with self._lock:
            self._turns.append((now, first_clause_s * 1000))
            if quiet:
                self._quiet.append(first_clause_s * 1000)
            self._forget(now)

    def tick(self) -> None:
        """Take a sample (at most one per ``TICK_S``/2) and update the call cost."""
        now = self._clock()
        underruns, underrun_s = self._misses()
        llm_s, llm_wall_s = self._llm_busy_s(), self._llm_wall_s()
        wall = llm_wall_s if llm_wall_s is not None else llm_s
        sample = _Sample(now, self._cpu_s(), self._box(), underruns, underrun_s, llm_s, wall)
        with self._lock:
            if self._samples and now - self._samples[-1].at < TICK_S / 2:
                return
            previous = self._samples[-1] if self._samples else None
            self._samples.append(sample)
            self._forget(now)
            if previous is not None:
                self._learn_cost(previous, sample)
            if self._live() == 0:
                self._restart_window(sample)

    def load(self) -> Load:
        """The measurements now (a sample is taken first)."""
        self.tick()
        live, talking = self._live(), self._talking()
        with self._lock:
            first, last = self._samples[0], self._samples[-1]
            span = max(last.at - first.at, 1e-6)
            box = _box_cores(first.box, last.box, self.box_cpus)
            cpu = (last.cpu_s - first.cpu_s) / span
            llm = _llm_share(self._samples)
            turns = [ms for _, ms in self._turns]
            now = last.at
            return Load(
                live=live,
                talking=talking,
                cores=self.cores,
                cpu_cores=cpu,
                box_cores=cpu if box is None else max(box, cpu),
                misses=max(0, last.underruns - first.underruns),
                missed_s=max(0.0, last.underrun_s - first.underrun_s),
                turns=len(turns),
                first_clause_ms=p90(turns) if len(turns) >= 3 else None,
                reference_ms=statistics.median(self._quiet) if self._quiet else None,
                call_cost=self._cost if self._cost is not None else prior_call_cost(self._lone_step_ms(), self.cores),
                misses_total=last.underruns,
                missed_total_s=last.underrun_s,
                llm_share=llm,
                llm_cost=self._llm_cost if self._llm_cost is not None else prior_llm_cost(self._lone_step_ms()),
                miss_ages_s=_miss_ages(self._samples, now),
                turn_ages_s=tuple((now - at, ms) for at, ms in self._turns),
            )

    def _restart_window(self, sample: _Sample) -> None:
        """Nobody is live (under the lock): the window's CPU, misses and slow turns were of calls
        that ended, so they are dropped and the window starts again at ``sample``; else a box whose
        last calls ran dry refused the next ones for up to :data:`WINDOW_S` with nothing running.
        The lone reference and the learned costs stay (the costs relax on their own)."""
        self._samples = deque([sample])
        self._turns.clear()

    def _forget(self, now: float) -> None:
        while len(self._samples) > 2 and now - self._samples[1].at >= WINDOW_S:
            self._samples.popleft()
        while self._turns and now - self._turns[0][0] > WINDOW_S:
            self._turns.popleft()

    def _learn_cost(self, previous: _Sample, sample: _Sample) -> None:
        """One step of the call cost's average from the CPU between two samples (under the lock)."""
        span = sample.at - previous.at
        if span <= 0:
            return
        cores = (sample.cpu_s - previous.cpu_s) / span
        talking, live = self._talking(), self._live()
        weight = min(1.0, span / COST_TAU_S)
        if live == 0:
            self._idle += weight * (cores - self._idle)
        if talking == 0:
            self._relax(weight)
            return
        measured = max(0.0, cores - self._idle) / talking
        prior = self._cost if self._cost is not None else prior_call_cost(self._lone_step_ms(), self.cores)
        self._cost = prior + weight * (measured - prior)
        if sample.llm_s is not None and previous.llm_s is not None:
            busy = (sample.llm_wall_s - previous.llm_wall_s) / span  # type: ignore[operator]
            self._learn_llm_cost((sample.llm_s - previous.llm_s) / span, busy, talking, weight)

    def _relax(self, weight: float) -> None:
        """One step of the learned costs back towards their priors while nobody talks (under the
        lock): nothing measures a talking call then, and a cost learned in a busy phase (a burst,
        one caller saturating the LLM, another job's cache misses) must not outlive its evidence:
        the box would refuse a second talker long after the load went away."""
        lone_step_ms = self._lone_step_ms()
        if self._cost is not None:
            self._cost += weight * (prior_call_cost(lone_step_ms, self.cores) - self._cost)
        llm_prior = prior_llm_cost(lone_step_ms)
        if self._llm_cost is not None and llm_prior is not None:
            self._llm_cost += weight * (llm_prior - self._llm_cost)

    def _learn_llm_cost(self, share: float, busy: float, talking: int, weight: float) -> None:
        """One step of the LLM share's average from ``share`` of a tick the LLM computed for
        ``talking`` calls (thread time of the busy setting) while its step thread was busy ``busy``
        of the tick (wall; under the lock). A saturated LLM (:data:`LLM_SATURATED` of the wall time)
        says only that a call costs at least share / talking: the average then only rises (else it
        would fall as talkers are added, and admit more the busier the LLM is)."""
        measured = share / talking
        prior = self._llm_cost if self._llm_cost is not None else prior_llm_cost(self._lone_step_ms())
        if prior is None:
            self._llm_cost = measured
        elif busy < LLM_SATURATED or measured > prior:
            self._llm_cost = prior + weight * (measured - prior)


def _llm_share(samples: Sequence[_Sample]) -> Optional[float]:
    """The share of the span of ``samples`` the LLM's step thread computed, wall time (from the
    first sample that has a reading; None without two). At most 1.0: a step is counted when it
    ends, so one begun before the first sample may add more than the span it ended in."""
    read = [s for s in samples if s.llm_wall_s is not None]
    if len(read) < 2 or read[-1].at <= read[0].at:
        return None
    busy = (read[-1].llm_wall_s - read[0].llm_wall_s) / (read[-1].at - read[0].at)  # type: ignore[operator]
    return min(1.0, max(0.0, busy))


def _miss_ages(samples: Sequence[_Sample], now: float) -> tuple[float, ...]:
    """The age at ``now`` (s) of each underrun counted in the window of ``samples``, oldest first
    (a miss is dated by the sample that first counted it)."""
    ages: list[float] = []
    for previous, sample in itertools.pairwise(samples):
        ages += [now - sample.at] * max(0, sample.underruns - previous.underruns)
    return tuple(ages)


def _process_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def _box_cores(
    first: Optional[tuple[float, float]], last: Optional[tuple[float, float]], cores: int
) -> Optional[float]:
    if first is None or last is None or last[1] <= first[1]:
        return None
    return (last[0] - first[0]) / (last[1] - first[1]) * cores


def p90(values: Sequence[float]) -> float:
    """The 90th percentile (the value at index 0.9 x n of the sorted ones) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
