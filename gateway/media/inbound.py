"""The unit's inbound audio reader: consume the caller's track, resample to the VAD's rate."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Optional

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gateway.media.resample import Resampler

log = logging.getLogger(__name__)

# aiortc keeps the audio jitter buffer of an RTCRtpReceiver in this private (name-mangled) attribute.
_JITTER_BUFFER = "_RTCRtpReceiver__jitter_buffer"
_warned_prefetch = False


def drop_receive_prefetch(receiver: Any) -> bool:
    """Make ``receiver`` (an aiortc RTCRtpReceiver of audio) hand each frame on as soon as it is
    complete, instead of holding 4 frames (80 ms) first. That prefetch smooths playback; the gateway
    does not play the caller's audio, it reads the track for VAD and STT, so the hold is only delay.
    Lost and reordered packets are still handled by the buffer as before.

    aiortc has no setting for it: the private buffer's ``_prefetch`` is set to 0. Returns False
    (logged once per process) when aiortc's private attributes are not as expected, and leaves the
    receiver as it was."""
    global _warned_prefetch
    buffer = getattr(receiver, _JITTER_BUFFER, None)
    if buffer is None or not isinstance(getattr(buffer, "_prefetch", None), int):
        if not _warned_prefetch:
            _warned_prefetch = True
            log.info("aiortc's receiver has no jitter-buffer prefetch to drop; inbound audio keeps its 80 ms hold")
        return False
    buffer._prefetch = 0
    return True


class InboundAudioReader:
    """Read every frame of ``track`` (aiortc's inbound queue is unbounded, so it must always be
    drained), convert it to int16 mono at ``rate`` Hz and pass it to ``on_audio(samples, arrival)``
    with ``arrival`` = time.monotonic().

    ``on_timeout`` is called when no frame arrives for ``media_timeout_s`` (the caller is gone
    without signalling: killed tab, lost network, a bridge that dropped the leg); None: never (the
    owner judges the caller's presence itself).

    ``receiver``: the RTCRtpReceiver of ``track``; given, its 80 ms receive prefetch is dropped
    (:func:`drop_receive_prefetch`), so each frame reaches the VAD as soon as it is complete.
    """

    def __init__(
        self,
        track: MediaStreamTrack,
        rate: int,
        on_audio: Callable[[np.ndarray, float], None],
        on_timeout: Callable[[], None],
        media_timeout_s: Optional[float],
        receiver: Optional[Any] = None,
    ) -> None:
        if receiver is not None:
            drop_receive_prefetch(receiver)
        self._track = track
        self._resampler = Resampler(rate)
        self._on_audio = on_audio
        self._on_timeout = on_timeout
        self._timeout = media_timeout_s

    async def run(self) -> None:
        """Read until the track ends (returns quietly) or ``media_timeout_s`` passes with no frame
        (calls ``on_timeout`` once, then returns). Run as a task for the whole call."""
        while True:
            try:
                frame = await asyncio.wait_for(self._track.recv(), self._timeout)
            except TimeoutError:
                log.info("no caller audio for %.1f s", self._timeout)
                self._on_timeout()
                return
            except MediaStreamError:
                return  # the track ended (peer connection closed)
            arrived = time.monotonic()
            if not isinstance(frame, av.AudioFrame):
                continue  # an audio track yields audio frames; anything else is not caller audio
            samples = self._resampler.resample_frame(frame)
            if samples.size:
                self._on_audio(samples, arrived)
