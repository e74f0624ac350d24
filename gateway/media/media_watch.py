"""The caller's inbound media over the length of a call: the audio clock kept running when RTP
stops, and the media timeout judged on every packet the caller sends.

A caller may stop sending RTP without leaving: silence suppression on SIP legs (RFC 3389 comfort
noise, then nothing), Opus DTX (RFC 7587 3.1.3: a frame every 400 ms at most), a muted bridge.

- **Clock**: the VAD finds the end of a turn in the audio it is given. When frames stop coming,
  silence (zeros) is given in their place once they are :data:`GAP_FILL_AFTER_S` late, so that a
  turn ends after ``silence_duration_ms`` of wall-clock time, as if silence had been sent.
- **Presence**: the caller is gone only when nothing at all arrives for ``media_timeout_s``: no
  audio frame and no packet of any kind on its transport (RTP of any payload type, RTCP reports,
  DTLS), read from the transport's ``packetsReceived`` (W3C webrtc-stats RTCTransportStats). A DTX
  caller listening to a long answer still sends RTCP receiver reports about it (RFC 3550 6.2).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Optional

import numpy as np

log = logging.getLogger(__name__)

# Frames this late are filled with silence. Frames that are merely delayed (network jitter, a TURN
# relay, an event loop busy for a moment on a loaded machine) arrive later all the same: silence
# given in their place would be spliced into the caller's words ("France" heard as "friends"). So
# only a gap no jitter explains counts as the caller having stopped sending (DTX, silence
# suppression); the whole gap is then given at once, so the turn still ends on the wall clock.
GAP_FILL_AFTER_S = 0.3
# How often the clock is looked at, s.
_TICK_S = 0.02

PacketCount = Callable[[], Awaitable[Optional[int]]]


class CallerMedia:
    """Between the inbound reader and the unit: :meth:`audio` is the reader's ``on_audio``
    (int16 mono samples at ``rate`` Hz, arrival in ``time.monotonic()`` s), passed on to
    ``on_audio``; :meth:`run` (a task, started once ICE/DTLS connected) fills gaps with silence and
    calls ``on_gone()`` once when neither audio nor any packet came for ``media_timeout_s`` (never while
    :attr:`paused`: a call on hold).

    ``packets_received()`` returns the transport's count of received packets (None when unknown:
    then only audio frames count). Gaps are filled only after the first frame: a caller that never
    sent audio has no turn to end.
    """

    def __init__(
        self,
        *,
        rate: int,
        on_audio: Callable[[np.ndarray, float], None],
        on_gone: Callable[[], None],
        media_timeout_s: float,
        packets_received: PacketCount,
    ) -> None:
        self._rate = rate
        self._on_audio = on_audio
        self._on_gone = on_gone
        self._timeout = media_timeout_s
        self._packets_received = packets_received
        self._clock_at: Optional[float] = None  # end of the audio given so far (monotonic s)
        self.last_frame_at: Optional[float] = None
        self.filled_ms = 0.0  # silence given in place of missing frames
        self.paused = False  # the call is on hold: no media is no reason to hang up

    def audio(self, samples: np.ndarray, arrival: float) -> None:
        """A decoded frame of caller audio (the reader's ``on_audio``)."""
        self.last_frame_at = arrival
        self._clock_at = max(arrival, self._clock_at or arrival)
        self._on_audio(samples, arrival)

    def _fill(self, now: float) -> None:
        if self._clock_at is None or now - self._clock_at < GAP_FILL_AFTER_S:
            return
        samples = int((now - self._clock_at) * self._rate)
        if samples > 0:
            self._clock_at += samples / self._rate
            self.filled_ms += samples * 1000 / self._rate
            self._on_audio(np.zeros(samples, np.int16), now)

    async def run(self) -> None:
        """Run for the call (cancel it at hang-up); returns after ``on_gone()``."""
        loop_start = time.monotonic()
        heard_at = loop_start  # the last time anything came from the caller
        last_count: Optional[int] = None
        check_every = max(0.2, min(1.0, self._timeout / 5))
        next_check = loop_start + check_every
        while True:
            await asyncio.sleep(_TICK_S)
            now = time.monotonic()
            self._fill(now)
            if now < next_check:
                continue
            next_check = now + check_every
            if self.last_frame_at is not None:
                heard_at = max(heard_at, self.last_frame_at)
            if self.paused:
                heard_at = now
            count = await self._packets_received()
            if count is not None and last_count is not None and count > last_count:
                heard_at = now
            last_count = count if count is not None else last_count
            if now - heard_at >= self._timeout:
                log.info("nothing from the caller for %.1f s", now - heard_at)
                self._on_gone()
                return


async def transport_packets_received(receiver: object) -> Optional[int]:
    """``packetsReceived`` of the transport stats of an aiortc RTCRtpReceiver (every datagram its
    DTLS transport read: SRTP, SRTCP, DTLS), None when its stats have none."""
    get_stats = getattr(receiver, "getStats", None)
    if get_stats is None:
        return None
    try:
        report = await get_stats()
    except Exception:  # the transport is closing
        return None
    counts = [stats.packetsReceived for stats in report.values() if getattr(stats, "type", None) == "transport"]
    return sum(counts) if counts else None
