"""Noise suppression of the caller's audio, per session, before VAD and STT.

Driven by the Realtime session field ``audio.input.noise_reduction`` (beta:
``input_audio_noise_reduction``): ``{"type": "near_field"}`` (a headset or a phone held to the
ear), ``{"type": "far_field"}`` (a laptop or a speakerphone in a room), or null (off, the
default), as OpenAI's Realtime API defines it.

The suppressor is WebRTC's noise suppression (the ``NoiseSuppressor`` of ``pywebrtc-audio``,
Apache-2.0, the audio processing module of libwebrtc): a Wiener filter on 10 ms frames whose noise
estimate follows the stationary part of the input. ``near_field`` runs it at level 1 (12 dB of
suppression), ``far_field`` at level 2 (18 dB): the speaker is further from the microphone there,
so more room noise is under the voice. The levels were chosen by ``scripts/bench_noise.py`` (WER
of Whisper base by SNR in office noise; see docs/BENCHMARKS.md): stronger levels remove more noise
but start to eat word onsets that Whisper needs. It removes stationary noise (hum, fans, pink
noise), not other voices: babble at 0 dB SNR is still misheard (WER ~0.7), and the DNN suppressors
measured (RNNoise, DTLN, DeepFilterNet3) did worse, since they keep or tear speech alike.

Input and output: int16 mono at ``sample_rate`` Hz (8, 16, 32 or 48 kHz). Samples are processed
in whole 10 ms frames; the rest of a call's input waits for the next call (at most 10 ms of delay),
so :meth:`NoiseSuppressor.process` may return fewer or more samples than it was given, never
more than it has been given in all. One instance per session (the filter's noise estimate is
the session's); not thread-safe.
"""

from __future__ import annotations

import importlib.util
from typing import Optional

import numpy as np

# audio.input.noise_reduction.type -> WebRTC NS level (0..3: 6, 12, 18, 21 dB of suppression)
NS_LEVELS = {"near_field": 1, "far_field": 2}
NOISE_REDUCTION_TYPES = tuple(NS_LEVELS)


class NoiseSuppressorUnavailable(RuntimeError):
    """``pywebrtc-audio`` is not installed (scripts/setup.sh installs it)."""


class NoiseSuppressor:
    """WebRTC noise suppression of one session's caller audio (see the module docstring).

    ``kind``: "near_field" or "far_field" (ValueError otherwise). Raises
    :class:`NoiseSuppressorUnavailable` when the library is missing.
    """

    def __init__(self, kind: str, sample_rate: int = 16000) -> None:
        if kind not in NS_LEVELS:
            raise ValueError(f"noise reduction type must be one of {NOISE_REDUCTION_TYPES}, not {kind!r}")
        try:
            import pywebrtc_audio
        except ImportError as exc:
            raise NoiseSuppressorUnavailable(f"pywebrtc-audio is not installed ({exc}): run scripts/setup.sh") from exc
        self.kind = kind
        self.sample_rate = sample_rate
        self._frame = sample_rate // 100  # 10 ms
        self._filter = pywebrtc_audio.NoiseSuppressor(sample_rate, 1, NS_LEVELS[kind])
        self._pending = np.zeros(0, np.int16)

    def process(self, samples: np.ndarray) -> np.ndarray:
        """Suppressed int16 samples of the whole 10 ms frames now available (see the module docstring)."""
        pending = np.concatenate([self._pending, np.asarray(samples, dtype=np.int16).reshape(-1)])
        whole = len(pending) // self._frame * self._frame
        self._pending = pending[whole:]
        if not whole:
            return np.zeros(0, np.int16)
        return np.asarray(self._filter.process(np.ascontiguousarray(pending[:whole])), dtype=np.int16)

    def reset(self) -> None:
        """Forget the noise estimate and any pending samples (a new session)."""
        self._filter.reset()
        self._pending = np.zeros(0, np.int16)


def available() -> bool:
    """True when the suppression library (``pywebrtc-audio``) can be imported."""
    return importlib.util.find_spec("pywebrtc_audio") is not None


def suppressor_for(
    kind: Optional[str], current: Optional[NoiseSuppressor], sample_rate: int
) -> Optional[NoiseSuppressor]:
    """The suppressor a session with ``noise_reduction`` type ``kind`` (None: off) should use:
    ``current`` when it already is one of that kind and rate, else a new one (or None)."""
    if kind is None:
        return None
    if current is not None and current.kind == kind and current.sample_rate == sample_rate:
        return current
    return NoiseSuppressor(kind, sample_rate)
