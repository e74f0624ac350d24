"""What the gateway's recordings take in its record directory, measured off the event loop: the
measure the disk bound of a new recording reads (``record_max_bytes``,
``gateway.transports.call_record.disk_refusal``).

Measuring is a scan of the directory and a ``stat`` a file (``call_record.recorded_bytes``): ~110 ms
on the event loop at tens of thousands of files, once for every recording a session asked for. A
recording starts where nothing may wait (a ``session.update`` is applied whole or not at all, in
order with the events after it; ``Door.open`` runs at once between a claim and an SDP answer or a
WebSocket upgrade), so the check reads the last measure, and the measuring runs in a worker thread:
at start, after each recorded call of this process is written and pruned, and when a session that
may ask to be recorded opens, or a recording starts, while the last measure is older than
:data:`MAX_AGE_S`. A recorded call of this process that ends counts at once, before its files are
written and measured: the WAV it will write (:meth:`RecordUsage.ended`), until the measure after its
write replaces the estimate (its report, a few KB, counts from then). So a recording is held to what
the directory took at most that long before its session opened, plus every call this process ended
since; another process's call written since counts at the next measure. Recordings being made may
pass the bound by what they record until they end, as before.

The door does not wait for a measure in flight: ``Door.open`` and a ``session.update`` are
applied at once (an SDP answer, an upgrade, the order of a session's events), and the call that
just ended is counted without it. For that moment, an ended call whose work files the last measure
saw may count twice (those files and its WAV): the bound errs towards refusing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Optional

from gateway.transports.call_record import RecordPolicy, recorded_bytes

log = logging.getLogger(__name__)

# A measure older than this, s, is taken again (in the background) when a session opens or starts a recording.
MAX_AGE_S = 2.0


class RecordUsage:
    """The bytes the gateway's files take in ``policy``'s record directory, as last measured in a
    worker thread (:meth:`measure`, :meth:`measure_soon`); nothing is measured unless the policy
    bounds them (:attr:`RecordPolicy.bytes_bounded`). One per door, shared by its sessions.
    ``clock``: monotonic s."""

    def __init__(self, policy: RecordPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.bytes: Optional[int] = None  # the last measure; None: none yet
        self.measured_at: Optional[float] = None  # when the last measure started (monotonic s)
        self._clock = clock
        self._lock = asyncio.Lock()  # one measure at a time, each started after the one before ended
        self._tasks: set[asyncio.Future[Any]] = set()
        self._ended: dict[str, int] = {}  # call id -> WAV bytes of an ended call not measured yet

    def ended(self, call_id: str, wav_bytes: int) -> None:
        """A recorded call of this process ended: count the ``wav_bytes`` its WAV will take from now
        on (in :meth:`last`), until :meth:`measure` with ``written=call_id`` after its write."""
        if self.policy.bytes_bounded:
            self._ended[call_id] = wav_bytes

    async def measure(self, written: Optional[str] = None) -> Optional[int]:
        """Measure now, in a worker thread, after any measure under way (so what was written before
        this call is counted); None when the policy bounds no bytes. ``written``: the call whose
        files were just written, counted by this measure from now on instead of by :meth:`ended`."""
        if not self.policy.bytes_bounded:
            return None
        assert self.policy.directory is not None
        try:
            async with self._lock:
                started = self._clock()
                self.bytes = await asyncio.to_thread(recorded_bytes, self.policy.directory)
                self.measured_at = started
        finally:
            if written is not None:
                self._ended.pop(written, None)
        return self.bytes

    def measure_soon(self) -> None:
        """Start :meth:`measure` in the background unless one is under way or the last measure is
        younger than :data:`MAX_AGE_S` (or the policy bounds no bytes)."""
        if not self.policy.bytes_bounded or self._lock.locked():
            return
        if self.measured_at is not None and self._clock() - self.measured_at < MAX_AGE_S:
            return
        task = asyncio.ensure_future(self.measure())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def last(self) -> int:
        """The last measure plus the calls ended since (:meth:`ended`), in bytes, and a new measure
        started in the background when the last is old. Before any measure (a door used without
        :meth:`measure` at start), one is taken here, on the caller's thread."""
        if self.bytes is None:
            assert self.policy.directory is not None
            log.warning("record directory %s measured on the event loop: not measured at start", self.policy.directory)
            self.bytes, self.measured_at = recorded_bytes(self.policy.directory), self._clock()
        used = self.bytes + sum(self._ended.values())
        self.measure_soon()
        return used

    async def close(self) -> None:
        """Wait for the measures under way (their threads end by themselves)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
