"""The unit's outbound audio track: 20 ms frames paced on the wall clock."""

from __future__ import annotations

import asyncio
import fractions
import time
from collections.abc import Callable
from typing import Optional

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gateway.media.echo_reference import EchoReference
from gateway.media.playout import SAMPLE_RATE, PlayoutBuffer, PlayoutEvents
from gateway.media.thinking_cue import ThinkingCue

FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000  # 960
_TIME_BASE = fractions.Fraction(1, SAMPLE_RATE)
# If the event loop stalled for longer than this, restart the clock instead of sending a burst.
_MAX_LAG_S = 0.2
# A frame made more than one frame after it was due is a pacing miss (``late`` in the frame hook).
LATE_AFTER_S = FRAME_MS / 1000

# Called once per frame sent: (the frame carried reply audio (else silence), it was late).
FrameHook = Callable[[bool, bool], None]


class PacedAudioTrack(MediaStreamTrack):
    """An aiortc audio track of s16 mono 48 kHz frames of 960 samples, paced on the wall clock.

    aiortc pulls ``recv()`` as fast as it can, so the track sleeps until each frame is due; ``pts``
    counts samples (time base 1/48000) and grows by 960 a frame. Subclasses give the samples of
    each frame in :meth:`next_samples`. ``on_frame(audio, late)``, if given, is called on the event
    loop for each frame: ``late`` when it was made over :data:`LATE_AFTER_S` after it was due.
    """

    kind = "audio"

    def __init__(self, on_frame: Optional[FrameHook] = None) -> None:
        super().__init__()
        self._start: float | None = None
        self._pts = 0
        self._on_frame = on_frame

    def next_samples(self) -> np.ndarray:  # pragma: no cover - abstract
        """int16 array of exactly FRAME_SAMPLES samples for the frame now due."""
        raise NotImplementedError

    async def recv(self) -> av.AudioFrame:
        """The next 20 ms frame, returned when it is due; after an event-loop stall of over 200 ms
        the clock restarts rather than sending a burst. Raises MediaStreamError once the track is
        stopped, which is how aiortc learns a track has ended."""
        if self.readyState != "live":
            raise MediaStreamError
        late = False
        if self._start is None:
            self._start = time.monotonic()
        else:
            self._pts += FRAME_SAMPLES
            delay = self._start + self._pts / SAMPLE_RATE - time.monotonic()
            late = delay < -LATE_AFTER_S
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -_MAX_LAG_S:
                self._start = time.monotonic() - self._pts / SAMPLE_RATE
            if self.readyState != "live":  # stopped while we slept: read nothing more
                raise MediaStreamError
        samples = self.next_samples()
        if self._on_frame is not None:
            self._on_frame(self.carried_audio, late)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = self._pts
        frame.time_base = _TIME_BASE
        return frame

    @property
    def carried_audio(self) -> bool:
        """Whether the frame just made held sound (True here; the output track says False for the
        silence it sends while no reply plays)."""
        return True


class OutputAudioTrack(PacedAudioTrack):
    """The unit's outbound track: plays a :class:`PlayoutBuffer`, silence when it is empty.

    ``on_events`` is called on the event loop with what each frame started or finished (first
    audio of a response, end of a response). ``echo_reference``, if given, records every frame as
    it leaves (what the caller's side may echo back). ``cue``, if given, is the unit's thinking cue
    (``gateway.media.thinking_cue``): played in frames with no reply audio while it is due, and
    stopped by the first frame of reply audio; not while the buffer is suspended (a call on hold:
    the cue waits for the resume with the reply). Its frames count as sound (``carried_audio``, the
    RTP marker of a SIP leg) and are recorded as played, so its echo starts no turn.
    ``on_samples(samples, played_at)``, if given, gets every frame too (int16 48 kHz, silence and
    cue included; ``played_at`` monotonic s), for a recording.
    """

    def __init__(
        self,
        buffer: PlayoutBuffer,
        on_events: Callable[[PlayoutEvents], None] = lambda e: None,
        on_frame: Optional[FrameHook] = None,
        echo_reference: Optional[EchoReference] = None,
        cue: Optional[ThinkingCue] = None,
        on_samples: Optional[Callable[[np.ndarray, float], None]] = None,
    ) -> None:
        super().__init__(on_frame)
        self._buffer = buffer
        self._cue = cue
        self._on_samples = on_samples
        self._echo_reference = echo_reference
        self._on_events = on_events
        self._carried_audio = False

    @property
    def carried_audio(self) -> bool:
        """Whether the frame just made held sound: reply audio or the thinking cue (False:
        silence, nothing was playing)."""
        return self._carried_audio

    def next_samples(self) -> np.ndarray:
        samples, events = self._buffer.read_frame(FRAME_SAMPLES)
        if self._cue is not None:
            if samples is not None:
                self._cue.stop()  # the answer is heard: the cue ends in this very frame
            elif not self._buffer.suspended:  # nobody hears it on hold: it waits for the resume
                samples = self._cue.read(FRAME_SAMPLES)
        self._carried_audio = samples is not None
        if samples is None:
            samples = np.zeros(FRAME_SAMPLES, np.int16)
        if self._echo_reference is not None:
            self._echo_reference.record(samples, audible=self._carried_audio)
        if self._on_samples is not None:
            self._on_samples(samples, time.monotonic())
        if events.started is not None or events.stopped is not None:
            self._on_events(events)
        return samples
