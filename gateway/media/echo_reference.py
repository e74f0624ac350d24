"""What the caller's side played back, to tell the assistant's own echo from the caller's voice.

On legs without echo cancellation at the far end (SIP phones and PCMU bridges, speakerphones) the
caller's microphone picks up the assistant's audio a little later and quieter. The gateway knows
exactly what it sent, so :class:`EchoReference` keeps the last :data:`HISTORY_S` of it (as the
output track sent it, frame by frame on the wall clock, decimated to 16 kHz) and measures how much
of a stretch of caller audio is a delayed, scaled copy of it: the peak normalised cross-correlation
over delays of 0 to :data:`MAX_DELAY_MS` (:meth:`EchoReference.echo_share`). Pure echo scores near
1 (after two codec passes and resampling, ~0.8-0.95); a caller's own voice, whatever echo lies
under it, scores by how much of the mix the echo is (a voice 10 dB above the echo: ~0.3); a leg
whose far end cancels echo (a browser) scores near 0, so the guard costs it nothing.

The VAD asks it before a turn starts while reply audio plays (``turn_detection.echo_guard``).
Only a real-time reader records (the WebRTC track); a transport that reads ahead of what the
caller hears (the WebSocket pacer) does not, and its legs get no guard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Optional

import numpy as np

RATE = 16000  # Hz, the VAD's rate
HISTORY_S = 2.0
MAX_DELAY_MS = 800  # longest echo path searched (network + jitter buffers + the acoustic path)
_QUIET_RMS = 1e-4  # reference or input this quiet (float, -80 dBFS) has no echo to find


class EchoReference:
    """A ring of the audio sent to the caller, at 16 kHz, with the wall-clock time of its end.

    :meth:`record` is called by the output track with each 48 kHz int16 frame as it leaves (on
    the event loop); :meth:`echo_share` by the VAD thread. Thread-safe.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ring = np.zeros(int(RATE * HISTORY_S), np.float32)
        self._end_time: Optional[float] = None  # monotonic time of the ring's last sample
        self._last_sound: Optional[float] = None  # when a frame last carried reply audio
        self._lock = threading.Lock()

    def record(self, samples_48k: np.ndarray, audible: bool) -> None:
        """One frame sent (int16 mono 48 kHz); ``audible``: it carried reply audio (else silence)."""
        frame = samples_48k.astype(np.float32).reshape(-1) / 32768.0
        frame = frame[: frame.size - frame.size % 3].reshape(-1, 3).mean(axis=1)  # 48 -> 16 kHz
        now = self._clock()
        with self._lock:
            self._ring = np.concatenate([self._ring[frame.size :], frame])
            self._end_time = now
            if audible:
                self._last_sound = now

    def recently_played(self, at: float) -> bool:
        """True when reply audio left within :data:`MAX_DELAY_MS` before ``at`` (monotonic s)."""
        with self._lock:
            return self._last_sound is not None and at - self._last_sound <= MAX_DELAY_MS / 1000

    def echo_share(self, audio: np.ndarray, end_time: float) -> float:
        """How much of ``audio`` (float32 16 kHz mono, its last sample heard at ``end_time``,
        monotonic s) is a delayed copy of what was sent: the peak normalised cross-correlation,
        0..1, over delays 0..MAX_DELAY_MS. 0 when nothing audible was sent in that time."""
        x = np.asarray(audio, np.float32).reshape(-1)
        if x.size == 0 or float(np.sqrt(np.mean(x * x))) < _QUIET_RMS or not self.recently_played(end_time):
            return 0.0
        with self._lock:
            if self._end_time is None:
                return 0.0
            # The reference from (delay max + window) before end_time up to end_time.
            behind = max(0, round((self._end_time - end_time) * RATE))
            span = x.size + int(MAX_DELAY_MS * RATE / 1000)
            stop = self._ring.size - behind
            if stop <= x.size:
                return 0.0
            ref = self._ring[max(0, stop - span) : stop].copy()
        return _peak_correlation(x, ref)


def _peak_correlation(x: np.ndarray, ref: np.ndarray) -> float:
    """max over k of <x, ref[k:k+n]> / (|x| |ref[k:k+n]|), for every full window of ``ref``."""
    n = x.size
    if ref.size < n:
        return 0.0
    size = 1 << int(np.ceil(np.log2(ref.size + n)))
    corr = np.fft.irfft(np.fft.rfft(ref, size) * np.conj(np.fft.rfft(x, size)), size)[: ref.size - n + 1]
    energy = np.concatenate([[0.0], np.cumsum(ref.astype(np.float64) ** 2)])
    window = energy[n:] - energy[:-n]
    norm = np.sqrt(np.maximum(window, 1e-12) * float(np.dot(x, x)))
    loud = window > n * _QUIET_RMS**2
    if not loud.any():
        return 0.0
    return float(np.clip(np.max(corr[loud] / norm[loud]), 0.0, 1.0))
