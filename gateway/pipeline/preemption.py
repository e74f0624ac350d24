"""The hold on a preemptive reply: one generated from the speculative transcript at the caller's
pause, while the end of the turn is decided (``gateway.pool.preemptive`` starts, adopts and
discards it).

While held, the reply is the lowest-priority work of the shared models: its LLM evaluations and
its first sentence's synthesis carry :data:`~gateway.models.compute.deadline.NO_DEADLINE`
(speculative: they run only when no caller's due work waits), its audio waits unplayed in the
playout buffer and its events wait in the unit. Once the turn is confirmed with the same words,
:meth:`ReplyHold.adopt` makes it the response: from then on its work is due as any reply's, from
``asked_at``. Thread-safe: the unit adopts on the event loop, the LLM and TTS stage threads read.
"""

from __future__ import annotations

import threading
from typing import Optional

from gateway.models.compute.deadline import NO_DEADLINE


class ReplyHold:
    """Held until :meth:`adopt`; ``asked_at`` (monotonic s) is when the response adopted it."""

    def __init__(self) -> None:
        self._adopted = threading.Event()
        self.asked_at: Optional[float] = None

    @property
    def held(self) -> bool:
        """True until the turn's response adopted the reply."""
        return not self._adopted.is_set()

    def adopt(self, asked_at: float) -> None:
        """The turn was confirmed with the same words: the reply is its response, asked at ``asked_at``."""
        self.asked_at = asked_at
        self._adopted.set()

    def due(self, otherwise: float) -> float:
        """:data:`NO_DEADLINE` while held, else ``otherwise`` (the due time of a reply in the open)."""
        return NO_DEADLINE if self.held else otherwise
