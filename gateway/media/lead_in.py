"""The silence a TTS voice puts before a reply's first word, cut to a short lead-in.

A VITS voice (Piper) draws each phoneme's length from noise, the silence before the first one
included: "He was not an old supposed young man." starts 320-420 ms into its audio in about half
of the syntheses with the voice's own noise, ~55 ms in the others (docs/BENCHMARKS.md, "The voice's
lead-in"). Played as it is, that silence is time to first audio the caller waits through.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

LEAD_IN_LEVEL = 0.002  # |sample| (float, -1..1) at which the voice has begun: ~-54 dBFS
LEAD_IN_KEEP_MS = 20.0  # silence kept before the first sample at that level, ms


def voice_start(samples: np.ndarray) -> Optional[int]:
    """Index of the first sample of mono ``samples`` (float32 in -1..1, or int16) whose magnitude
    reaches :data:`LEAD_IN_LEVEL` (x 32768 for int16); None when none does."""
    if samples.dtype == np.int16:
        loud = np.abs(samples.astype(np.int32)) >= LEAD_IN_LEVEL * 32768
    else:
        loud = np.abs(samples) >= LEAD_IN_LEVEL
    index = int(np.argmax(loud)) if loud.size else 0
    return index if loud.size and loud[index] else None


def trim_lead_in(samples: np.ndarray, sample_rate: int, keep_ms: float = LEAD_IN_KEEP_MS) -> np.ndarray:
    """``samples`` (mono at ``sample_rate`` Hz: float32 in -1..1, or int16) from ``keep_ms`` before
    the voice (:func:`voice_start`); unchanged when there is none (silence only or empty: nothing to
    tell the voice's start by) or when the voice starts within ``keep_ms``. A view, not a copy."""
    start = voice_start(samples)
    if start is None:
        return samples
    return samples[max(0, start - int(sample_rate * keep_ms / 1000)) :]
