"""Stateful sample-rate and channel conversion with PyAV (libswresample)."""

from __future__ import annotations

import av
import numpy as np


class Resampler:
    """Convert audio to int16 mono at ``rate`` Hz, keeping filter state between calls.

    One instance per stream: swresample carries the filter history across frames, so a stream cut
    into 20 ms frames resamples without clicks at the frame edges. Input may be any PyAV
    :class:`av.AudioFrame` (e.g. aiortc's 48 kHz stereo s16 Opus output, or 8 kHz PCMU) or a numpy
    array (see :meth:`resample_array`).
    """

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        self._source: tuple | None = None

    def resample_frame(self, frame: av.AudioFrame) -> np.ndarray:
        """int16 array, shape (n,), of ``frame`` converted; n varies slightly because of the filter delay."""
        source = (frame.format.name, frame.layout.name, frame.sample_rate)
        if self._source is not None and source != self._source:
            # A codec change mid-call (rare, e.g. renegotiation): swresample cannot switch inputs.
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=self.rate)
        self._source = source
        frame.pts = None  # our own timing is by sample count; stale pts upset swresample's drift logic
        return _concat(self._resampler.resample(frame))

    def resample_array(self, samples: np.ndarray, rate: int) -> np.ndarray:
        """Mono ``samples`` (float32 in -1..1, or int16) at ``rate`` Hz -> int16 at ``self.rate``."""
        samples = np.ascontiguousarray(samples)
        fmt = "s16" if samples.dtype == np.int16 else "flt"
        if fmt == "flt":
            samples = samples.astype(np.float32, copy=False)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format=fmt, layout="mono")
        frame.sample_rate = rate
        return self.resample_frame(frame)

    def flush(self) -> np.ndarray:
        """The samples still inside the filter at the end of a stream."""
        return _concat(self._resampler.resample(None))


def _concat(frames: list[av.AudioFrame]) -> np.ndarray:
    if not frames:
        return np.zeros(0, np.int16)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.int16, copy=False)
