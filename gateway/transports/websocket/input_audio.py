"""The caller audio of one WebSocket session (``input_audio_buffer.append``), decoded off the event
loop: base64 text in the session's input format -> int16 mono at the lease's input rate ->
``lease.submit_audio``, in pieces of at most ``PIECE_S``.

The session (``gateway.realtime.audio_events.EventAudioSession``) has already checked each
append's length against its audio budget; here the base64 characters are decoded, G.711 expanded
and the audio resampled in a worker thread, one append at a time and in the order they came, a
piece at a time (no step holds the interpreter for long). A commit or clear waits for the appends
before it (:meth:`InputAudio.then`). Nothing of an append is submitted when any of it is not valid
base64; the client gets an ``error`` naming ``audio`` instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from gateway.media.audio_format import AudioFormat, InputAudioDecoder
from gateway.pool.lease import UnitLease
from gateway.realtime.audio_events import base64_size, decode_base64

log = logging.getLogger(__name__)

# Seconds of input audio per decoding step and per queued message (``AudioIn``).
PIECE_S = 0.1


@dataclass
class _Append:
    audio: str  # base64
    format: AudioFormat
    seconds: float
    received_at: float  # time.monotonic() when it arrived
    refused: Callable[[str], None]


class InputAudio:
    """The caller audio of ``input_audio_buffer.append`` for ``lease``, decoded in the event loop's
    worker threads by a task started with ``spawn`` (the session's: cancelled at hang-up).
    Implements ``gateway.realtime.audio_events.AudioInput``. A new decoder is made when the input
    format changes (``session.update``); each append carries the format it was sent in."""

    def __init__(self, lease: UnitLease, spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        self._lease = lease
        self._rate = lease.input_rate
        self._spawn = spawn
        self._jobs: deque[_Append | Callable[[], None]] = deque()
        self._running = False
        self._decoder: Optional[InputAudioDecoder] = None
        self._pending_s = 0.0

    @property
    def pending_s(self) -> float:
        """Seconds of appended audio not yet decoded and submitted."""
        return self._pending_s

    def append(self, audio: str, input_format: dict, refused: Callable[[str], None]) -> None:
        """Decode ``audio`` (base64 of ``input_format``, its length already checked) after the
        appends before it; ``refused(reason)`` on the loop when it is not valid base64."""
        fmt = AudioFormat.from_session(input_format)
        seconds = fmt.duration_ms(base64_size(audio)) / 1000
        self._pending_s += seconds
        self._jobs.append(_Append(audio, fmt, seconds, time.monotonic(), refused))
        self._start()

    def then(self, action: Callable[[], None], flush: bool = False) -> None:
        """Run ``action`` once the appends before it are submitted (at once when none waits); with
        ``flush``, after the samples the decoder still holds too (a commit takes them all)."""
        if flush:
            self._jobs.append(self._flush)
        if not self._running and not self._jobs:
            action()
            return
        self._jobs.append(action)
        self._start()

    def _flush(self) -> None:
        """On the loop, between jobs: submit what the decoder's resampler still holds."""
        if self._decoder is not None:
            held = self._decoder.flush()
            if held.size:
                self._lease.submit_audio(held, time.monotonic())

    def _start(self) -> None:
        if not self._running:
            self._running = True
            self._spawn(self._run())

    async def _run(self) -> None:
        try:
            while self._jobs:
                job = self._jobs.popleft()
                if isinstance(job, _Append):
                    await self._submit(job)
                    continue
                try:
                    job()
                except Exception:  # a bug must cost this event, not the session's audio
                    log.exception("input audio: a commit or clear failed")
        finally:
            self._running = False

    async def _submit(self, job: _Append) -> None:
        try:
            pieces = await asyncio.get_running_loop().run_in_executor(None, self._decode, job)
        except ValueError as exc:  # not base64, or not audio of the format (AudioFormatError)
            job.refused(str(exc))
            return
        finally:
            self._pending_s = max(0.0, self._pending_s - job.seconds)
        for piece in pieces:
            self._lease.submit_audio(piece, job.received_at)

    def _decode(self, job: _Append) -> list[np.ndarray]:
        """In a worker thread, one append at a time: the append's audio, in pieces."""
        data = decode_base64(job.audio)
        if self._decoder is None or self._decoder.format != job.format:
            self._decoder = InputAudioDecoder(job.format, self._rate)
        return self._decoder.decode_pieces(data, PIECE_S)
