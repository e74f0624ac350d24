"""Decode step times of a batched LLM, by batch size.

A :class:`~gateway.models.llama_cpp.batch.BatchDecoder` advances every running turn by one token per
step; :class:`StepTimes` keeps how long its pure decode steps (one token per sequence) took, by the
number of sequences in the step: seeded at start-up by a short probe (``BatchDecoder.measure_steps``,
run by the warm-up) and updated by the steps of real turns, so they follow the machine as it is
loaded (a busy core slows every size). A step that also reads a prompt chunk costs more and says
nothing about decode, so it is not recorded. Admission reads the lone step (the prior cost of a
conversation before any is measured, ``gateway.pool.load``); ``/v1/pool`` and ``/metrics`` show them all.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque

KEEP_STEPS = 32  # durations kept per batch size (the median of these is used)


class StepTimes:
    """Durations of decode steps by batch size (sequences in the step), the last ``keep`` of each.

    Thread-safe: the decoder's step thread records, admission and ``/metrics`` read."""

    def __init__(self, keep: int = KEEP_STEPS) -> None:
        self._keep = keep
        self._steps: dict[int, deque[float]] = {}
        self._lock = threading.Lock()

    def record(self, size: int, seconds: float) -> None:
        """One decode step that advanced ``size`` sequences by one token each in ``seconds``."""
        if size < 1 or seconds <= 0:
            return
        with self._lock:
            self._steps.setdefault(size, deque(maxlen=self._keep)).append(seconds * 1000.0)

    def typical_ms(self) -> dict[int, float]:
        """The median step duration per batch size measured so far, ms (sizes in order)."""
        with self._lock:
            return {size: statistics.median(self._steps[size]) for size in sorted(self._steps)}
