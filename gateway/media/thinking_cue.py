"""The thinking cue: a short, quiet sound the outbound track plays while the caller waits.

No dead air: while a tool call runs, or
when a turn's first answer audio is late, the caller may hear a soft thinking sound or a short
spoken filler ("One moment.") instead of silence. It is a setting, off by default (``--thinking-cue``,
per session ``audio.output.thinking_cue``). The pipeline unit decides when the cue is due
(:class:`ThinkingCue`, armed per response); the output track (``gateway.media.outbound``) plays it
only in frames that carry no answer audio, and the first frame of answer audio stops it. The cue
never enters the playout buffer, so it makes no Realtime events, items or transcripts.

Sounds, int16 mono at :data:`RATE` (48 kHz, the track's rate):

- :func:`thinking_tone`: two soft sine notes (C5 then E5, 140 ms each, raised-cosine envelopes)
  every 1.6 s, peak :data:`TONE_PEAK_DBFS` (-30 dBFS; speech peaks near -6 dBFS), looped.
- a filler: the session's own voice saying :data:`FILLER_TEXT` once (:class:`FillerCache`
  synthesizes it once per voice and keeps it), scaled down to :data:`FILLER_PEAK_DBFS`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Optional

import numpy as np

from gateway.media.resample import Resampler

log = logging.getLogger(__name__)

RATE = 48000  # Hz, the output track's rate
CUE_KINDS = ("off", "tone", "filler")
TONE_PEAK_DBFS = -30.0
FILLER_PEAK_DBFS = -12.0  # a filler is speech, said softly
FILLER_TEXT = "One moment."
TONE_NOTES_HZ = (523.25, 659.25)  # C5, E5
NOTE_MS = 140
NOTE_GAP_MS = 60
CYCLE_MS = 1600
MAX_CUE_S = 20.0  # a cue sounds at most this long (a tool that never answers gets silence after it)


def _peak(dbfs: float) -> float:
    return 32767.0 * 10 ** (dbfs / 20)


def thinking_tone(rate: int = RATE) -> np.ndarray:
    """One cycle of the thinking sound, int16 mono at ``rate`` Hz, :data:`CYCLE_MS` long: two soft
    notes (:data:`TONE_NOTES_HZ`, :data:`NOTE_MS` each, :data:`NOTE_GAP_MS` apart) and silence.
    Played in a loop; its peak is :data:`TONE_PEAK_DBFS`."""
    cycle = np.zeros(rate * CYCLE_MS // 1000, np.float64)
    note = rate * NOTE_MS // 1000
    t = np.arange(note) / rate
    envelope = np.sin(np.pi * np.arange(note) / note) ** 2  # raised cosine: no clicks
    start = 0
    for hz in TONE_NOTES_HZ:
        cycle[start : start + note] += np.sin(2 * np.pi * hz * t) * envelope
        start += note + rate * NOTE_GAP_MS // 1000
    return np.round(cycle * _peak(TONE_PEAK_DBFS)).astype(np.int16)


def filler_audio(pieces: Iterable[np.ndarray], source_rate: int) -> np.ndarray:
    """A synthesized filler (float32 -1..1 mono pieces at ``source_rate`` Hz, as a TTS yields them)
    as int16 mono 48 kHz, its peak scaled to :data:`FILLER_PEAK_DBFS`."""
    resampler = Resampler(RATE)
    parts = [resampler.resample_array(np.asarray(p, np.float32), source_rate) for p in pieces]
    parts.append(resampler.flush())
    audio = np.concatenate(parts).astype(np.float64)
    peak = float(np.abs(audio).max()) if audio.size else 0.0
    if peak == 0.0:
        return np.zeros(0, np.int16)
    return np.round(audio * (_peak(FILLER_PEAK_DBFS) / peak)).astype(np.int16)


class FillerCache:
    """Fillers by voice, each synthesized once (a TTS call, off the event loop: :meth:`prepare`
    runs in a worker thread) and kept for every later session of the process. Thread-safe."""

    def __init__(self) -> None:
        self._ready: dict[Hashable, np.ndarray] = {}
        self._making: set[Hashable] = set()
        self._causes: set[str] = set()  # failures logged
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Optional[np.ndarray]:
        """The filler of ``key`` (e.g. the TTS voice and the session's voice name), None until made."""
        with self._lock:
            return self._ready.get(key)

    def claim(self, key: Hashable) -> bool:
        """True when the caller should make the filler of ``key`` (nobody has, nobody is)."""
        with self._lock:
            if key in self._ready or key in self._making:
                return False
            self._making.add(key)
            return True

    def prepare(self, key: Hashable, make: Callable[[], np.ndarray]) -> None:
        """Make and keep the filler of ``key`` (after :meth:`claim` said so); a failure (``make``
        raised, or made no audio) is kept as an empty filler (the tone is used instead) and logged
        as a warning, once per cause (the exception's type and text)."""
        try:
            audio = make()
            cause = None if audio.size else "the voice made no audio"
        except Exception as exc:
            audio, cause = np.zeros(0, np.int16), f"{type(exc).__name__}: {exc}"
        if cause is not None:
            with self._lock:
                told = cause in self._causes
                self._causes.add(cause)
            if not told:
                log.warning("thinking cue: the filler %r could not be made (%s); the tone plays instead", key, cause)
        with self._lock:
            self._ready[key] = audio
            self._making.discard(key)


class ThinkingCue:
    """When the unit's cue sounds, and its samples, frame by frame.

    :meth:`arm` (a response started, or goes on waiting for a tool) makes ``sound`` due at ``at``
    (monotonic s); arming again while armed keeps the earlier due time and, once it sounds, its
    place in the sound (a tool call's wait runs straight into the next response's). :meth:`read`
    is called by the output track for each frame with no answer audio: the next ``samples`` of the
    sound once due, else None. A looped sound (the tone) repeats, a single one (a filler) plays
    once per arming; either goes quiet :data:`MAX_CUE_S` after it started. :meth:`stop` (answer
    audio, barge-in, cancel, the end of the call) silences it at once. Thread-safe: the track reads
    on the event loop, the VAD thread may stop it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._sound: Optional[np.ndarray] = None
        self._loop = True
        self._due = 0.0
        self._offset = 0
        self._started: Optional[float] = None  # when it began to sound
        self.frames_played = 0  # frames of cue audio read (for tests and /v1/pool)

    @property
    def armed(self) -> bool:
        """True from :meth:`arm` to :meth:`stop` (sounding or due later)."""
        with self._lock:
            return self._sound is not None

    @property
    def sounding(self) -> bool:
        """True while the cue is audible (armed, due, and neither spent nor past its longest)."""
        with self._lock:
            return self._sound is not None and self._started is not None and not self._spent(self._clock())

    def arm(self, sound: np.ndarray, at: float, loop: bool = True) -> None:
        """Make ``sound`` (int16 mono 48 kHz) due at ``at`` (monotonic s); see the class docstring."""
        with self._lock:
            if self._sound is not None:
                self._due = min(self._due, at)
                if self._started is None:
                    self._sound, self._loop = sound, loop  # not heard yet: the newest choice wins
                return
            self._sound, self._loop, self._due = sound, loop, at
            self._offset = 0
            self._started = None

    def stop(self) -> bool:
        """Silence the cue now; True when it was armed."""
        with self._lock:
            was = self._sound is not None
            self._sound = None
            self._started = None
            self._offset = 0
            return was

    def read(self, samples: int) -> Optional[np.ndarray]:
        """``samples`` of cue audio (int16, zero-padded) for the frame now due, or None when the cue
        is not armed, not due yet, spent or past :data:`MAX_CUE_S`."""
        now = self._clock()
        with self._lock:
            sound = self._sound
            if sound is None or now < self._due or sound.size == 0:
                return None
            if self._started is None:
                self._started = now
            if self._spent(now):
                return None
            out = np.zeros(samples, np.int16)
            filled = 0
            while filled < samples:
                if self._offset >= sound.size:
                    if not self._loop:
                        break
                    self._offset = 0
                take = sound[self._offset : self._offset + samples - filled]
                out[filled : filled + take.size] = take
                filled += take.size
                self._offset += take.size
            self.frames_played += 1
            return out

    def _spent(self, now: float) -> bool:
        assert self._sound is not None
        if self._started is not None and now - self._started >= MAX_CUE_S:
            return True
        return not self._loop and self._offset >= self._sound.size
