"""Reply audio for a transport that carries it in events (the WebSocket transport's
``response.output_audio.delta``): the playout buffer read ahead of real time, by a bounded lead,
and the caller's playback clock kept, so that what the caller heard is known.

Over WebRTC the outbound track reads the playout buffer in real time, so what left the buffer is
what was heard. An event client receives audio faster than it plays it (it buffers, so network
jitter does not starve it); the pacer sends at most ``lead_ms`` ahead of the caller's playback and
tells the buffer how much of what it read is not heard yet (:meth:`PlayoutPacer.take_unheard`), so
barge-in keeps only the words the caller heard. The caller's playback is modelled as a client
plays a stream: each chunk starts when the one before it ends, or when it arrives if the caller
was waiting for audio.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Optional

import numpy as np

from gateway.media.playout import SAMPLE_RATE, PlayoutBuffer, PlayoutEvents

FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000  # 960 samples at 48 kHz
DEFAULT_LEAD_MS = 400  # at most this much audio is sent ahead of the caller's playback
DEFAULT_BATCH_MS = 100  # audio is sent in pieces of about this length (after the first of a reply)


class PlayoutPacer:
    """Reads a :class:`PlayoutBuffer` in 20 ms frames, ahead of the caller's playback by at most
    ``lead_ms``, and hands the audio on with ``on_audio(generation, samples)`` (int16 mono 48 kHz,
    a whole number of frames, one generation per call).

    ``on_played(samples, played_at)``, if given, gets the same audio placed where the caller's
    playback clock plays it (``played_at`` monotonic s, the start of ``samples``), and
    ``on_unheard(at)`` that what was placed after ``at`` is dropped unheard (a clear), for a recording.

    ``on_events`` gets the buffer's :class:`PlayoutEvents` as the WebRTC track reports them:
    ``started`` when a response's first audio is sent, ``stopped`` once its last audio has been
    heard (the playback clock passed it). While created, the pacer is the buffer's ``read_ahead``
    (see :meth:`take_unheard`); :meth:`stop` undoes that. :meth:`pump` does one round of work
    (tests call it with a fake ``clock``); :meth:`run` pumps every ``FRAME_MS`` until cancelled.
    All on the event loop, except :meth:`take_unheard` (any thread, under the buffer's lock).
    """

    def __init__(
        self,
        buffer: PlayoutBuffer,
        on_audio: Callable[[int, np.ndarray], None],
        on_events: Callable[[PlayoutEvents], None],
        *,
        lead_ms: int = DEFAULT_LEAD_MS,
        batch_ms: int = DEFAULT_BATCH_MS,
        clock: Callable[[], float] = time.monotonic,
        on_played: Optional[Callable[[np.ndarray, float], None]] = None,
        on_unheard: Optional[Callable[[float], None]] = None,
    ) -> None:
        self._buffer = buffer
        self._on_audio = on_audio
        self._on_played = on_played
        self._on_unheard = on_unheard
        self._cut_at: Optional[float] = None  # a clear's time, told to on_unheard on the next pump
        self._on_events = on_events
        self._lead_s = lead_ms / 1000
        self._refill_s = max(0.0, (lead_ms - batch_ms) / 1000)
        self._clock = clock
        self._play_end = clock()  # when the caller will have heard all the audio sent so far
        self._generation: Optional[int] = None  # generation of the audio being read
        self._stops: deque[tuple[float, PlayoutEvents]] = deque()  # (heard by, the event)
        self._waiters: list[tuple[int, Callable[[], None]]] = []
        buffer.read_ahead = self

    # ----- the caller's playback clock -----
    def ahead_s(self) -> float:
        """Seconds of audio sent and not yet heard by the caller (0 when it waits for audio)."""
        return max(0.0, self._play_end - self._clock())

    def take_unheard(self) -> int:
        """The buffer was cleared (barge-in, cancel): samples sent but not heard yet, which the
        caller drops, so its playback clock restarts now. Called by ``PlayoutBuffer.clear``."""
        now = self._clock()
        unheard = max(0.0, self._play_end - now)
        self._play_end = now
        if unheard:
            self._cut_at = now
        return int(unheard * SAMPLE_RATE)

    # ----- reading -----
    def pump(self) -> None:
        """Send what is due: top the caller's lead up to ``lead_ms`` once it fell to
        ``lead_ms - batch_ms`` (at once when the caller waits for audio), deliver ``stopped``
        events whose audio has been heard, and run :meth:`after_sent` callbacks that are due."""
        now = self._clock()
        cut, self._cut_at = self._cut_at, None
        if cut is not None and self._on_unheard is not None:
            self._on_unheard(cut)
        while self._stops and self._stops[0][0] <= now:
            self._on_events(self._stops.popleft()[1])
        if self._play_end - now <= self._refill_s:
            self._read(now)
        self._release_waiters()

    def _read(self, now: float) -> None:
        pending: list[np.ndarray] = []
        self._play_end = max(self._play_end, now)
        while self._play_end - now < self._lead_s - 1e-6:  # (float sums of 20 ms steps)
            samples, events = self._buffer.read_frame(FRAME_SAMPLES)
            if events.started is not None:
                self._flush(pending)
                self._generation = events.started
                self._on_events(PlayoutEvents(started=events.started))
            if samples is not None:
                pending.append(samples)
                self._play_end += FRAME_MS / 1000
            if events.stopped is not None:
                self._flush(pending)
                self._stops.append((self._play_end, PlayoutEvents(stopped=events.stopped)))
            if samples is None:
                break
        self._flush(pending)

    def _flush(self, pending: list[np.ndarray]) -> None:
        if pending and self._generation is not None:
            samples = np.concatenate(pending)
            self._on_audio(self._generation, samples)
            if self._on_played is not None:
                self._on_played(samples, self._play_end - samples.size / SAMPLE_RATE)
        pending.clear()

    def after_sent(self, generation: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` once no audio of ``generation`` is left in the buffer (all of it sent,
        or dropped as stale): at once if none is queued, else after the pump that sends the last."""
        if self._buffer.holds(generation):
            self._waiters.append((generation, callback))
        else:
            callback()

    def _release_waiters(self) -> None:
        if not self._waiters:
            return
        due = [(g, cb) for g, cb in self._waiters if not self._buffer.holds(g)]
        self._waiters = [(g, cb) for g, cb in self._waiters if self._buffer.holds(g)]
        for _, callback in due:
            callback()

    async def run(self) -> None:
        """Pump every ``FRAME_MS`` until cancelled."""
        while True:
            self.pump()
            await asyncio.sleep(FRAME_MS / 1000)

    def stop(self) -> None:
        """Read nothing more and leave the buffer (the unit may serve a WebRTC call next);
        pending ``stopped`` events and callbacks are dropped."""
        if self._buffer.read_ahead is self:
            self._buffer.read_ahead = None
        self._stops.clear()
        self._waiters.clear()
