"""Read an audio file of any format FFmpeg knows (WAV, raw excluded) as int16 mono."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from gateway.media.resample import Resampler


def read_audio_file(path: str | Path, rate: int = 48000) -> np.ndarray:
    """Decode ``path`` with PyAV and return int16 mono samples at ``rate`` Hz.

    Raises ValueError with the file name when the file cannot be decoded or holds no audio
    (malformed headers, missing data chunk, bogus sample rate...).
    """
    resampler = Resampler(rate)
    pieces: list[np.ndarray] = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise ValueError(f"{path}: no audio stream")
            for frame in container.decode(audio=0):
                pieces.append(resampler.resample_frame(frame))
    except (av.FFmpegError, OSError) as exc:
        raise ValueError(f"{path}: cannot decode audio ({exc})") from None
    pieces.append(resampler.flush())
    samples = np.concatenate(pieces) if pieces else np.zeros(0, np.int16)
    if samples.size == 0:
        raise ValueError(f"{path}: no audio samples")
    return samples
