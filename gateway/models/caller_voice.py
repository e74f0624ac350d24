"""Where the caller's own voice is in a turn: the frames whose level stands above the babble floor.

In an office the caller is nearer the microphone than each background talker, so the caller's
syllables stand out of the floor that the other talkers and the room make together. Whisper, given
the whole turn, also writes down what the background talkers say while the caller pauses (before
the first word, after the last, in pauses), words the caller never said. :func:`caller_span` finds
the stretch from the caller's first to last voiced frame, so that STT hears only that (pauses
inside it stay: cutting them out would join the caller's words).

The floor is the :data:`FLOOR_PERCENTILE` th percentile of the 20 ms frame levels (dB) of the turn:
the gateway's VAD hands over turns with a lead-in and a silence tail, so a fifth of the frames are
the background alone. A frame is the caller's when it is :data:`MARGIN_DB` above that floor and
most of its neighbours (:data:`DENSE_OF`) are too (a lone louder frame of babble is not a voice);
each such frame is widened by :data:`HANGOVER_MS` on both sides (soft onsets and word tails). In
clean speech the floor is the line noise, every word is far above it, and the cut only trims
silence. Tuned on Piper sentences and the real recordings of ``../shared/fixtures/speech`` in
seeded office noise (``scripts/bench_noise.py``, noise seed 0); margins of 3 and 4.5 dB let in
the babble again, 9 dB cut the caller's softer words.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

SAMPLE_RATE = 16000  # Hz
FRAME = SAMPLE_RATE // 50  # 20 ms, in samples
FLOOR_PERCENTILE = 20.0
MARGIN_DB = 6.0  # a caller's frame is this far above the floor
DENSE_OF = (3, 5)  # at least 3 of the 5 frames around it are above the floor too
HANGOVER_MS = 200  # each voiced frame also covers this much before and after it


def frame_levels_db(audio: np.ndarray) -> np.ndarray:
    """Level of each whole 20 ms frame of ``audio`` (float32 16 kHz), dB re full scale: shape (frames,)."""
    count = audio.size // FRAME
    frames = np.asarray(audio[: count * FRAME], dtype=np.float64).reshape(count, FRAME)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-10)


def _dense_frames(audio: np.ndarray, margin_db: float) -> np.ndarray:
    """Boolean mask over the 20 ms frames of ``audio``: ``margin_db`` above the floor, and dense."""
    levels = frame_levels_db(audio)
    if levels.size == 0:
        return np.zeros(0, dtype=bool)
    above = levels > np.percentile(levels, FLOOR_PERCENTILE) + margin_db
    needed, width = DENSE_OF
    return np.asarray(np.convolve(above.astype(np.int32), np.ones(width, dtype=np.int32), mode="same") >= needed)


def first_voice_sample(audio: np.ndarray, margin_db: float = MARGIN_DB) -> Optional[int]:
    """Sample offset of the first 20 ms frame of ``audio`` (float32 mono 16 kHz) that is the
    caller's voice (as :func:`voice_frames`, before the hangover widens it), or None when none is."""
    dense = np.flatnonzero(_dense_frames(audio, margin_db))
    return int(dense[0]) * FRAME if dense.size else None


def voice_frames(audio: np.ndarray, margin_db: float = MARGIN_DB) -> np.ndarray:
    """Boolean mask over the 20 ms frames of ``audio`` (float32 mono 16 kHz): True where the
    caller's voice is (``margin_db`` above the floor, dense, widened by :data:`HANGOVER_MS`)."""
    dense = _dense_frames(audio, margin_db)
    if dense.size == 0:
        return dense
    reach = HANGOVER_MS // 20
    widened = np.convolve(dense.astype(np.int32), np.ones(2 * reach + 1, dtype=np.int32), mode="same") > 0
    return np.asarray(widened, dtype=bool)


def caller_span(audio: np.ndarray, margin_db: float = MARGIN_DB) -> Optional[tuple[int, int]]:
    """(start, end) in samples of ``audio`` (float32 mono 16 kHz) from the caller's first to last
    voiced frame (:func:`voice_frames`), or None when no frame stands out of the floor (steady
    noise, or audio under 20 ms)."""
    voiced = np.flatnonzero(voice_frames(audio, margin_db))
    if voiced.size == 0:
        return None
    end = audio.size if voiced[-1] + 1 >= audio.size // FRAME else (int(voiced[-1]) + 1) * FRAME
    return int(voiced[0]) * FRAME, end


def caller_voice_only(audio: np.ndarray, margin_db: float = MARGIN_DB) -> np.ndarray:
    """``audio`` cut to :func:`caller_span` (the whole of it when no span is found: nothing to
    judge by, so nothing is thrown away)."""
    span = caller_span(audio, margin_db)
    return audio if span is None else audio[span[0] : span[1]]
