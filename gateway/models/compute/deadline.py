"""Deadlines of the work the shared models do for callers, and the order they serve it in.

Most of a call is not compute: a caller speaks, then listens to a reply that plays at speaking rate
(about 3 words/s) while the LLM writes ~20 tokens/s. A reply needs its first clause fast and the
rest only just in time, so each unit of work of a shared model (an LLM evaluation of the batched
decoder, one TTS sentence, one STT turn) carries ``due``, the ``time.monotonic()`` second by which it
should be done:

- a turn's first clause (its prompt, the tokens up to its first piece of speech, that piece's
  synthesis, the turn's transcript) is due when the turn was asked: at once, earliest turn first;
- a reply's later tokens and audio are due when its playout would run dry, less the time it takes
  to make them (``gateway.pipeline.pacing``);
- speculative work (read-aheads, warms) has none (:data:`NO_DEADLINE`): it runs only when no due
  work waits, and is dropped first.

Relative to now, work is one of :class:`Urgency`: ``DUE`` (due within :data:`HORIZON_S`: served
first, earliest deadline first), ``AHEAD`` (due within :data:`PAUSE_AHEAD_S`: served only while
nothing is due; a reply whose buffer holds seconds of audio yields to a new first clause),
``PAUSED`` (further ahead: it waits, so that compute is not spent seconds before it is needed) and
``SPECULATIVE``. Cancelled work is dropped by its owner at once (it stops waiting).

:class:`DeadlineGate` serves calls of shared models in that order (:data:`SPEECH_MODELS`: STT and
TTS); the batched LLM decoder plans its steps by the same classes (``gateway.models.llama_cpp.schedule``).
"""

from __future__ import annotations

import enum
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional, TypeVar, Union

from gateway.models.compute.core_use import CORE_USE

T = TypeVar("T")

NO_DEADLINE = math.inf
# Work due within this many seconds counts as due now (batched together with what is due now).
HORIZON_S = 0.25
# Work due later than this many seconds from now waits (it is that far ahead of its caller).
PAUSE_AHEAD_S = 3.0


class Urgency(enum.IntEnum):
    """What a deadline means now, most urgent first (an IntEnum: it sorts)."""

    DUE = 0
    AHEAD = 1
    PAUSED = 2
    SPECULATIVE = 3


def urgency(due: float, now: float, horizon_s: float = HORIZON_S, pause_s: float = PAUSE_AHEAD_S) -> Urgency:
    """The class of work due at ``due`` (monotonic s; :data:`NO_DEADLINE`: speculative) at ``now``."""
    if due == NO_DEADLINE:
        return Urgency.SPECULATIVE
    if due <= now + horizon_s:
        return Urgency.DUE
    return Urgency.AHEAD if due <= now + pause_s else Urgency.PAUSED


@dataclass(order=True)
class _Waiter:
    due: float
    ticket: int
    due_of: Optional[Callable[[], float]] = field(default=None, compare=False)  # re-read while waiting

    def refresh(self) -> None:
        if self.due_of is not None:
            self.due = self.due_of()


Due = Union[float, Callable[[], float]]


class DeadlineGate:
    """At most ``slots`` calls of a shared model at once, earliest deadline first.

    A caller wraps its model call in :meth:`slot`. A free slot goes to the waiter with the earliest
    ``due`` that is not :attr:`Urgency.PAUSED` (arrival order breaks ties); a paused one waits until
    its deadline comes within :data:`PAUSE_AHEAD_S`. A waiter whose ``should_stop`` turns True leaves
    at once (polled every ``poll_s``). Thread-safe; the stage threads of every unit share one gate
    per model. ``waits`` counts the calls that had to wait and ``wait_s`` their total wait.
    """

    def __init__(self, slots: int = 1, poll_s: float = 0.02, pause_s: float = PAUSE_AHEAD_S) -> None:
        self.slots = max(1, slots)
        self._poll_s = poll_s
        self._pause_s = pause_s
        self._cond = threading.Condition()
        self._waiting: list[_Waiter] = []
        self._running = 0
        self._tickets = 0
        self.waits = 0
        self.wait_s = 0.0

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot now."""
        with self._cond:
            return len(self._waiting)

    @contextmanager
    def slot(self, due: Due, should_stop: Callable[[], bool] = lambda: False) -> Iterator[bool]:
        """Hold a slot for the enclosed call; yields True, or False when ``should_stop`` turned True
        first (the caller then skips the call: it holds no slot). ``due``: monotonic s, or a function
        of none giving it, asked again while the call waits (a held preemptive reply's sentence has
        no deadline until its response adopts it)."""
        started = time.monotonic()
        granted = self._acquire(due, should_stop)
        waited = time.monotonic() - started
        if waited > self._poll_s:
            with self._cond:
                self.waits += 1
                self.wait_s += waited
        if not granted:
            yield False
            return
        try:
            yield True
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def _acquire(self, due: Due, should_stop: Callable[[], bool]) -> bool:
        with self._cond:
            self._tickets += 1
            me = _Waiter(due(), self._tickets, due) if callable(due) else _Waiter(due, self._tickets)
            self._waiting.append(me)
            try:
                while not self._first(me):
                    if should_stop():
                        return False
                    self._cond.wait(self._poll_s)
                self._running += 1
                return True
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()

    def each(self, items: Iterable[T], due: Callable[[], float], should_stop: Callable[[], bool]) -> Iterator[T]:
        """``items`` (a model's generator: e.g. one sentence of audio per item), each computed in a
        slot taken at its ``due()`` (asked again while it waits); ends early when ``should_stop``
        turns True while waiting."""
        iterator = iter(items)
        while True:
            with self.slot(due, should_stop) as granted:
                if not granted:
                    return
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item

    def _first(self, me: _Waiter) -> bool:
        """True when a slot is free and ``me`` is the earliest waiter that is not paused."""
        if self._running >= self.slots:
            return False
        now = time.monotonic()
        for waiter in self._waiting:
            waiter.refresh()
        ready = [w for w in self._waiting if urgency(w.due, now, pause_s=self._pause_s) is not Urgency.PAUSED]
        return bool(ready) and min(ready) is me


# The speech models' calls of this process (STT and TTS of every unit), one at a time per core the
# LLM's step thread leaves them: on 2 cores, one; a first clause's synthesis or a turn's transcript
# goes before a later sentence that is seconds ahead of its playout.
SPEECH_MODELS = DeadlineGate(slots=max(1, (os.cpu_count() or 2) - 1))


def computes_here(engine: object) -> bool:
    """Whether ``engine`` computes in this process (False for an engine that sends its work to a
    server, ``computes_here = False``: its calls wait on the network, not on this box's cores)."""
    return bool(getattr(engine, "computes_here", True))


@contextmanager
def speech_model_call(engine: object, due: Due, should_stop: Callable[[], bool] = lambda: False) -> Iterator[bool]:
    """Around one call of speech model ``engine``: a slot of :data:`SPEECH_MODELS` taken at ``due``
    (monotonic s, or a function giving it: :meth:`DeadlineGate.slot`) and the core counted busy,
    when the engine computes here; nothing otherwise. Yields True, or False when ``should_stop``
    turned True while the call waited for its slot (the caller then skips the call: the work is
    no longer wanted)."""
    if not computes_here(engine):
        yield True
        return
    with SPEECH_MODELS.slot(due, should_stop) as granted:
        if not granted:
            yield False
            return
        with CORE_USE.heavy():
            yield True


def each_speech_item(
    engine: object, items: Iterable[T], due: Callable[[], float], should_stop: Callable[[], bool]
) -> Iterator[T]:
    """``items`` of speech model ``engine`` (e.g. a TTS generator, one sentence each), each made in a
    slot (:meth:`DeadlineGate.each`) with the core counted busy, when the engine computes here."""
    if not computes_here(engine):
        return iter(items)
    return CORE_USE.each_heavy(SPEECH_MODELS.each(items, due, should_stop))
