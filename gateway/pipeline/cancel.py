"""Generation ids: the only way a response is cancelled."""

from __future__ import annotations

import threading


class CancelScope:
    """Hands out a generation id per response; cancelling makes every earlier id stale.

    Stages call :meth:`is_current` per token and per audio piece and drop output of any other
    generation, so late output of a cancelled response is never played or sent. ``live`` is True
    from :meth:`begin` until :meth:`finish` or :meth:`cancel` (the response is being generated).
    Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = 0
        self._live = False

    def begin(self) -> int:
        """Start a response; returns its generation id (every earlier one becomes stale)."""
        with self._lock:
            self._current += 1
            self._live = True
            return self._current

    def finish(self, generation: int) -> None:
        """The response finished generating (its audio may still be playing, it is still current)."""
        with self._lock:
            if generation == self._current:
                self._live = False

    def cancel(self) -> int:
        """Make the current generation stale; returns the id that was cancelled."""
        with self._lock:
            cancelled = self._current
            self._current += 1
            self._live = False
            return cancelled

    def is_current(self, generation: int) -> bool:
        """True unless ``generation`` was cancelled or superseded. Lock-free (one int read): stages
        ask per token and per audio piece."""
        return generation == self._current

    @property
    def current(self) -> int:
        """The newest generation id; right after a cancel it is one that no response holds."""
        return self._current

    @property
    def live(self) -> bool:
        """True while the current response is still generating (its audio may play on after)."""
        return self._live
