"""The queue between two stage threads."""

from __future__ import annotations

import threading
from collections import deque
from typing import Optional

from gateway.pipeline.messages import Message, TurnsDropped


class StageQueue:
    """A thread-safe FIFO that is bounded for droppable data and never drops control markers.

    Droppable messages (caller audio: ``AudioIn``, ``Utterance``) are bounded twice: by count
    (``max_droppable``, for many small messages: 1000 is 20 s of 20 ms frames) and by the audio
    they hold (``max_audio_samples``, samples at the VAD's rate; None: no such bound), so that a
    few large messages cannot hold minutes of audio either. Past either bound the oldest droppable
    message is dropped (counted in ``dropped``), never the one just put: a stage that falls behind
    loses old audio rather than growing memory without limit. A dropped message may leave a stand-in
    in its place (``Message.stand_in``: a finished turn leaves ``TurnsDropped``; next to another
    one of the same call, it only adds a turn to it). :meth:`flush` empties it of everything but
    control messages (the CallEnd marker).
    """

    def __init__(self, max_droppable: int = 1000, max_audio_samples: Optional[int] = None) -> None:
        self._items: deque[Message] = deque()
        self._droppable = 0
        self._audio = 0  # samples held by droppable messages
        self._max = max_droppable
        self._max_audio = max_audio_samples
        self._cond = threading.Condition()
        self.dropped = 0

    def put(self, item: Message) -> None:
        """Append ``item`` and wake a waiting :meth:`get`; never blocks, so the event loop can call it.
        Past a bound the oldest droppable message is dropped (counted in ``dropped``)."""
        with self._cond:
            self._items.append(item)
            if item.droppable:
                self._droppable += 1
                self._audio += item.audio_samples
                while self._droppable > 1 and self._over_bound():
                    self._drop_oldest_droppable()
            self._cond.notify()

    def _over_bound(self) -> bool:
        return self._droppable > self._max or (self._max_audio is not None and self._audio > self._max_audio)

    def _drop_oldest_droppable(self) -> None:
        for index, queued in enumerate(self._items):
            if queued.droppable:
                self._droppable -= 1
                self._audio -= queued.audio_samples
                self.dropped += 1
                stand_in = queued.stand_in()
                before = self._items[index - 1] if index else None
                if (
                    isinstance(stand_in, TurnsDropped)
                    and isinstance(before, TurnsDropped)
                    and before.call_id == stand_in.call_id
                ):
                    before.turns += stand_in.turns
                    stand_in = None
                if stand_in is None:
                    del self._items[index]
                else:
                    self._items[index] = stand_in
                return

    def get(self, timeout: Optional[float] = None) -> Optional[Message]:
        """Next message, or None after ``timeout`` seconds with nothing queued."""
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                return None
            item = self._items.popleft()
            if item.droppable:
                self._droppable -= 1
                self._audio -= item.audio_samples
            return item

    def flush(self) -> int:
        """Drop every non-control message; returns how many were dropped."""
        with self._cond:
            kept = deque(item for item in self._items if item.control)
            dropped = len(self._items) - len(kept)
            self._items = kept
            self._droppable = 0
            self._audio = 0
            return dropped

    @property
    def audio_samples(self) -> int:
        """Samples of caller audio queued now (droppable messages)."""
        with self._cond:
            return self._audio

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
