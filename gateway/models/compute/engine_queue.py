"""The queue in front of a shared LLM engine: FIFO turns, cancellable waits, measured queue wait.

One engine instance per process serves every pool unit. Each ``generate`` call takes a ticket and
waits until it is among the first ``slots`` tickets (1 for an in-process engine, which runs one
generation at a time; more for an HTTP server that batches). Tickets are served strictly in arrival
order, so no unit starves: the longest any caller waits is the work queued before it, and each
piece of that work is bounded by its token cap and compute budget. A waiter whose response is
cancelled leaves the queue at once (``should_stop`` is polled every ``poll_s``).

Queue waits (seconds) are kept in :class:`QueueWaitStats`, a cumulative histogram that the metrics
layer reads when ``/metrics`` is scraped (``vg_llm_queue_wait_ms``), one sample per admission: a
long prompt that :meth:`Turn.requeue` puts back behind waiting callers adds one more when it resumes.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Optional

# Upper bounds of the queue-wait histogram buckets, ms (Prometheus ``le``); +Inf is implied.
QUEUE_WAIT_BUCKETS_MS = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0)


@dataclass
class QueueWaitSnapshot:
    """A consistent copy of :class:`QueueWaitStats`: per-bucket counts (not cumulative; the last is
    the +Inf bucket), the sum of all waits in ms, and how many waits were recorded."""

    bucket_bounds_ms: tuple[float, ...]
    bucket_counts: list[int]
    sum_ms: float
    count: int


@dataclass
class ComputeLoad:
    """The shared engine's queue at one moment: ``running`` generations (at most ``slots``; 0 slots:
    no limit), ``waiting`` ones queued behind them."""

    running: int
    waiting: int
    slots: int

    @property
    def saturated(self) -> bool:
        """True when one more talking caller would have to wait for the engine: someone waits
        already, or every slot runs."""
        return self.waiting > 0 or (self.slots > 0 and self.running >= self.slots)

    def as_json(self) -> dict[str, int | bool]:
        return {"running": self.running, "waiting": self.waiting, "slots": self.slots, "saturated": self.saturated}


class QueueWaitStats:
    """Thread-safe histogram of queue waits; one per engine (so per process, like the engine)."""

    def __init__(self, bounds_ms: tuple[float, ...] = QUEUE_WAIT_BUCKETS_MS) -> None:
        self._bounds = bounds_ms
        self._counts = [0] * (len(bounds_ms) + 1)
        self._sum_ms = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def observe(self, wait_s: float) -> None:
        """Record one wait of ``wait_s`` seconds."""
        ms = wait_s * 1000.0
        with self._lock:
            self._counts[bisect.bisect_left(self._bounds, ms)] += 1
            self._sum_ms += ms
            self._count += 1

    def snapshot(self) -> QueueWaitSnapshot:
        """The histogram as it is now."""
        with self._lock:
            return QueueWaitSnapshot(self._bounds, list(self._counts), self._sum_ms, self._count)


class EngineQueue:
    """FIFO admission to a shared engine for at most ``slots`` concurrent generations (0 = no limit).

    Use :meth:`turn` around the engine work. Thread-safe; callers are stage threads of any unit.
    """

    def __init__(self, slots: int = 1, poll_s: float = 0.02) -> None:
        self.slots = slots
        self.stats = QueueWaitStats()
        self._poll_s = poll_s
        self._tickets = itertools.count()
        self._waiting: deque[int] = deque()  # tickets in arrival order, not yet admitted
        self._running = 0
        self._cond = threading.Condition()

    @property
    def waiting(self) -> int:
        """How many callers are queued behind the running ones."""
        with self._cond:
            return len(self._waiting)

    def load(self) -> ComputeLoad:
        """The compute queue now: generations running and waiting, and the slots."""
        with self._cond:
            return ComputeLoad(self._running, len(self._waiting), self.slots)

    @contextmanager
    def turn(self, should_stop: Callable[[], bool]) -> Iterator[Optional[Turn]]:
        """Wait for this caller's turn; yields a :class:`Turn`, or None if ``should_stop`` became
        True while waiting (the caller then does no work and is no longer queued).

        The wait is recorded in :attr:`stats` either way. The slot is released on exit.
        """
        started = time.monotonic()
        admitted = self._admit(should_stop)
        waited = time.monotonic() - started
        self.stats.observe(waited)
        if not admitted:
            yield None
            return
        handle = Turn(self, waited)
        try:
            yield handle
        finally:
            if handle.holding:
                self._release()

    def _release(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def _admit(self, should_stop: Callable[[], bool]) -> bool:
        with self._cond:
            ticket = next(self._tickets)
            self._waiting.append(ticket)
            try:
                while not (self._waiting[0] == ticket and (self.slots <= 0 or self._running < self.slots)):
                    if should_stop():
                        return False
                    self._cond.wait(self._poll_s)
                self._waiting.popleft()
                self._running += 1
                return True
            finally:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
                self._cond.notify_all()


class Turn:
    """A caller's hold on the engine (from :meth:`EngineQueue.turn`); ``waited_s`` is the queue wait."""

    def __init__(self, queue: EngineQueue, waited_s: float) -> None:
        self.waited_s = waited_s
        self.holding = True
        self._queue = queue
        self.started = time.monotonic()

    @property
    def others_waiting(self) -> bool:
        """True when another caller is queued for the engine."""
        return self._queue.waiting > 0

    def requeue(self, should_stop: Callable[[], bool]) -> bool:
        """Give the engine to the callers queued now and queue again behind them (a long prompt
        lets short turns through). Returns False if ``should_stop`` became True meanwhile; the
        extra wait is added to ``waited_s``."""
        self._queue._release()
        self.holding = False
        started = time.monotonic()
        admitted = self._queue._admit(should_stop)
        extra = time.monotonic() - started
        self.waited_s += extra
        self._queue.stats.observe(extra)
        self.holding = admitted
        self.started = time.monotonic()
        return admitted
