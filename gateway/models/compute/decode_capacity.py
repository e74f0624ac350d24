"""How many callers may talk at once, from measured decode steps of a batched LLM.

A :class:`~gateway.models.llama_cpp.batch.BatchDecoder` advances every running turn by one token per
step, so a turn among N concurrent ones gets its tokens at the pace of N-sequence steps: if a step
of N sequences takes ``t(N)`` ms, that turn decodes ``t(N) / t(1)`` times slower than a lone one.
The talking capacity is the largest N (at most the decoder's sequences) whose steps stay within
``TALKING_SLOWDOWN`` times a lone step; more talkers than that would each wait longer than the target.

Step times come from the decoder itself (:class:`StepTimes`): seeded at start-up by a short probe
of every batch size (``BatchDecoder.measure_steps``, run by the warm-up) and updated by the steps
of real turns, so the estimate follows the machine as it is loaded (a busy core slows every size).
Only pure decode steps (one token per sequence) are recorded; a step that also reads a prompt
chunk costs more and says nothing about decode. Capacity counts decode only: speech-to-text and
speech synthesis of the other callers add to the delay on a small machine, which is why the target
is 2x rather than the 2.5x a caller may see end to end.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from collections.abc import Mapping

# A turn among N talkers may decode at most this many times slower than a lone turn.
TALKING_SLOWDOWN = 2.0
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


def talking_capacity(step_ms: Mapping[int, float], ceiling: int, slowdown: float = TALKING_SLOWDOWN) -> int:
    """The most concurrent talkers, 1..``ceiling``, whose decode steps each take at most
    ``slowdown`` times a lone step, from ``step_ms`` (batch size -> typical step duration, ms).

    A size not measured is interpolated linearly between the measured sizes around it; beyond
    the largest measured size nothing is assumed (the count stops there). Without a measured
    lone step (size 1) nothing can be judged and ``ceiling`` is returned (one talker per batch
    sequence, as before the measurement). Always at least 1: a process with no call answers one.
    """
    ceiling = max(1, ceiling)
    lone = step_ms.get(1)
    if lone is None or lone <= 0:
        return ceiling
    sizes = sorted(size for size in step_ms if size >= 1)
    best = 1
    for n in range(2, ceiling + 1):
        estimate = _interpolated(step_ms, sizes, n)
        if estimate is None or estimate > slowdown * lone:
            break
        best = n
    return best


def _interpolated(step_ms: Mapping[int, float], sizes: list[int], n: int) -> float | None:
    """``step_ms[n]``, or a straight line between the measured sizes either side; None above them."""
    if n in step_ms:
        return step_ms[n]
    below = max((s for s in sizes if s < n), default=None)
    above = min((s for s in sizes if s > n), default=None)
    if below is None or above is None:
        return None
    share = (n - below) / (above - below)
    return step_ms[below] + share * (step_ms[above] - step_ms[below])
