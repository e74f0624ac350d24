"""The queue between two stage threads."""

from __future__ import annotations

import threading
from collections import deque
from typing import Optional

from gateway.pipeline.messages import Message


class StageQueue:
    """A thread-safe FIFO that is bounded for droppable data and never drops control markers.

    When more than ``max_droppable`` droppable messages (caller audio) wait, the oldest is dropped:
    a stage that falls behind loses old audio rather than growing memory without limit.
    :meth:`flush` empties it of everything but control messages (the CallEnd marker).
    """

    def __init__(self, max_droppable: int = 1000) -> None:
        self._items: deque[Message] = deque()
        self._droppable = 0
        self._max = max_droppable
        self._cond = threading.Condition()
        self.dropped = 0

    def put(self, item: Message) -> None:
        """Append ``item`` and wake a waiting :meth:`get`; never blocks, so the event loop can call it.
        Past ``max_droppable`` the oldest droppable message is dropped (counted in ``dropped``)."""
        with self._cond:
            if item.droppable:
                if self._droppable >= self._max:
                    self._drop_oldest_droppable()
                self._droppable += 1
            self._items.append(item)
            self._cond.notify()

    def _drop_oldest_droppable(self) -> None:
        for index, queued in enumerate(self._items):
            if queued.droppable:
                del self._items[index]
                self._droppable -= 1
                self.dropped += 1
                return

    def get(self, timeout: Optional[float] = None) -> Optional[Message]:
        """Next message, or None after ``timeout`` seconds with nothing queued."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                return None
            item = self._items.popleft()
            if item.droppable:
                self._droppable -= 1
            return item

    def flush(self) -> int:
        """Drop every non-control message; returns how many were dropped."""
        with self._cond:
            kept = deque(item for item in self._items if item.control)
            dropped = len(self._items) - len(kept)
            self._items = kept
            self._droppable = 0
            return dropped

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
