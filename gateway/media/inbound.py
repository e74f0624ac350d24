"""The unit's inbound audio reader: consume the caller's track, resample to the VAD's rate."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gateway.media.resample import Resampler

log = logging.getLogger(__name__)


class InboundAudioReader:
    """Read every frame of ``track`` (aiortc's inbound queue is unbounded, so it must always be
    drained), convert it to int16 mono at ``rate`` Hz and pass it to ``on_audio(samples, arrival)``
    with ``arrival`` = time.monotonic().

    ``on_timeout`` is called when no frame arrives for ``media_timeout_s`` (the caller is gone
    without signalling: killed tab, lost network, a bridge that dropped the leg).
    """

    def __init__(
        self,
        track: MediaStreamTrack,
        rate: int,
        on_audio: Callable[[np.ndarray, float], None],
        on_timeout: Callable[[], None],
        media_timeout_s: float,
    ) -> None:
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
            except asyncio.TimeoutError:
                log.info("no caller audio for %.1f s", self._timeout)
                self._on_timeout()
                return
            except MediaStreamError:
                return  # the track ended (peer connection closed)
            arrived = time.monotonic()
            samples = self._resampler.resample_frame(frame)
            if samples.size:
                self._on_audio(samples, arrived)
