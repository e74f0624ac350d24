"""The hold on a preemptive reply: one generated from the speculative transcript at the caller's
pause, while the end of the turn is decided (``gateway.pool.preemptive`` starts, adopts and
discards it).

While held, the reply is the lowest-priority work of the shared models: its LLM evaluations and
its first sentence's synthesis carry :data:`~gateway.models.compute.deadline.NO_DEADLINE`
(speculative: they run only when no caller's due work waits), its audio waits unplayed in the
playout buffer and its events wait in the unit; and it gives way (:meth:`ReplyHold.gives_way`:
its generation stops) as soon as another caller's turn waits for the LLM's place it holds. Once
the turn is confirmed with the same words, :meth:`ReplyHold.adopt` makes it the response: from then
on its work is due as any reply's, from ``asked_at``. A reply that gave way can no longer be adopted.
Thread-safe: the unit adopts on the event loop, the LLM and TTS stage threads read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Optional

from gateway.models.compute.deadline import NO_DEADLINE

_HELD, _ADOPTED, _GAVE_WAY = "held", "adopted", "gave way"


class ReplyHold:
    """Held until :meth:`adopt`; ``asked_at`` (monotonic s) is when the response adopted it.
    ``others_wait()``: True while another caller's turn waits for the LLM (None: never)."""

    def __init__(self, others_wait: Optional[Callable[[], bool]] = None) -> None:
        self._lock = threading.Lock()
        self._state = _HELD
        self._others_wait = others_wait
        self.asked_at: Optional[float] = None

    @property
    def held(self) -> bool:
        """True until the turn's response adopted the reply (or it gave way)."""
        return self._state == _HELD

    def adopt(self, asked_at: float) -> bool:
        """The turn was confirmed with the same words: the reply is its response, asked at
        ``asked_at``. False (nothing changes) when it gave way first: it cannot be the response."""
        with self._lock:
            if self._state != _HELD:
                return self._state == _ADOPTED
            self.asked_at = asked_at
            self._state = _ADOPTED
            return True

    def gives_way(self) -> bool:
        """True once the held reply gave way to another caller's waiting turn (asked per token by
        the LLM stage, as a stop condition); never once adopted."""
        with self._lock:
            if self._state == _HELD and self._others_wait is not None and self._others_wait():
                self._state = _GAVE_WAY
            return self._state == _GAVE_WAY

    def due(self, otherwise: float) -> float:
        """``otherwise`` (the due time of a reply in the open) once adopted, else :data:`NO_DEADLINE`."""
        return otherwise if self._state == _ADOPTED else NO_DEADLINE
