"""Smart Turn v3.2: semantic end-of-turn detection on the ONNX model shipped in the ``pipecat-ai`` wheel.

The model (Daily's Smart Turn v3.2, 8.7 MB, BSD-2-Clause, a Whisper-tiny encoder with a classifier
head) reads the last 8 s of a caller's turn and says how likely it is that the caller has finished
speaking: a sentence cut off mid-thought ("I want to book a table for...") scores low, a finished
question high. It is read from ``pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx`` of
the installed wheel (``pip install --no-deps pipecat-ai``); nothing is downloaded. pipecat itself is
never imported (its package needs dependencies the gateway does not install): only the file is used.

Input features (computed here, the same as ``transformers.WhisperFeatureExtractor(chunk_length=8)``
with ``do_normalize=True``): 16 kHz mono, the last 8 s (128 000 samples; shorter audio is padded
with zeros *before* it), waveform normalised to zero mean and unit variance, a 400-point periodic
Hann STFT every 160 samples (reflect-padded), power spectrum onto 80 Slaney mel bands (0–8 kHz),
log10, clamped to 8 below the maximum, scaled ``(x + 4) / 4``, the last frame dropped: float32
``(80, 800)``. The network takes ``input_features`` of shape (batch, 80, 800) and returns the
probability (sigmoid already applied) of shape (batch, 1).
"""

from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path
from typing import Optional

import numpy as np

from gateway.models.base import ModelNotFoundError
from gateway.models.weights import on_disk

log = logging.getLogger(__name__)

_DISTRIBUTION = "pipecat-ai"
_MODEL_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
_INSTALL_HINT = "pip install --no-deps pipecat-ai"

SAMPLE_RATE = 16000  # Hz
WINDOW_SAMPLES = 8 * SAMPLE_RATE  # the model sees the last 8 s
_N_FFT = 400  # 25 ms
_HOP = 160  # 10 ms
_N_MELS = 80
_FRAMES = WINDOW_SAMPLES // _HOP  # 800


def bundled_model_path() -> Path:
    """The ONNX file inside the installed ``pipecat-ai`` wheel. Raises ModelNotFoundError (naming
    the install command) when the wheel is not installed or the file is missing from it."""
    try:
        distribution = importlib.metadata.distribution(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFoundError(f"Smart Turn v3.2 needs the pipecat-ai wheel: {_INSTALL_HINT}") from None
    path = Path(str(distribution.locate_file(_MODEL_FILE)))
    if not path.is_file():
        raise ModelNotFoundError(f"{path} is missing from the installed pipecat-ai wheel: {_INSTALL_HINT}")
    return path


def _slaney_mel(hz: float | np.ndarray) -> np.ndarray:
    """Hz -> mel on the Slaney scale: linear below 1 kHz (3 mel per 200 Hz), logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz * 3.0 / 200.0
    logarithmic = 15.0 + np.log(np.maximum(hz, 1e-9) / 1000.0) * 27.0 / np.log(6.4)
    return np.where(hz >= 1000.0, logarithmic, linear)


def _slaney_hz(mel: float | np.ndarray) -> np.ndarray:
    """Inverse of :func:`_slaney_mel`."""
    mel = np.asarray(mel, dtype=np.float64)
    linear = mel * 200.0 / 3.0
    logarithmic = 1000.0 * np.exp((mel - 15.0) * np.log(6.4) / 27.0)
    return np.where(mel >= 15.0, logarithmic, linear)


def mel_filterbank(rate: int = SAMPLE_RATE, n_fft: int = _N_FFT, n_mels: int = _N_MELS) -> np.ndarray:
    """Triangular mel filters with Slaney area normalisation, float64 of shape (n_mels, n_fft // 2 + 1):
    ``filters @ power_spectrum`` gives mel band energies (the filterbank Whisper and librosa use)."""
    edges_hz = _slaney_hz(np.linspace(_slaney_mel(0.0), _slaney_mel(rate / 2), n_mels + 2))
    bins_hz = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    lower, centre, upper = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    rising = (bins_hz[None, :] - lower) / (centre - lower)
    falling = (upper - bins_hz[None, :]) / (upper - centre)
    triangles = np.maximum(0.0, np.minimum(rising, falling))
    return triangles * (2.0 / (upper - lower))


_FILTERS = mel_filterbank().astype(np.float32)
_HANN = (0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(_N_FFT) / _N_FFT)).astype(np.float32)  # periodic


def log_mel_features(audio: np.ndarray) -> np.ndarray:
    """Smart Turn input for one turn: ``audio`` float mono at 16 kHz (-1..1, any length; only the
    last 8 s are used) -> float32 (80, 800) log-mel features (see the module docstring)."""
    samples = np.asarray(audio, dtype=np.float32).reshape(-1)[-WINDOW_SAMPLES:]
    window = np.zeros(WINDOW_SAMPLES, np.float32)
    window[WINDOW_SAMPLES - samples.size :] = samples  # zeros before a short turn, as in training
    window = (window - window.mean()) / np.sqrt(window.var() + 1e-7)
    padded = np.pad(window, _N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, _N_FFT)[::_HOP]  # (801, 400)
    spectrum = np.fft.rfft(frames * _HANN, axis=-1)  # (801, 201), complex64 (NumPy 2 keeps float32)
    power = spectrum.real**2 + spectrum.imag**2
    mel = _FILTERS @ power.T  # (80, 801)
    log_mel = np.log10(np.maximum(mel, 1e-10))[:, :_FRAMES]
    log_mel = np.maximum(log_mel, log_mel.max() - 8.0)
    return ((log_mel + 4.0) / 4.0).astype(np.float32)


class SmartTurnDetector:
    """Smart Turn v3.2 on ONNX Runtime (CPU, one intra-op thread: one inference is ~10–60 ms on this
    size of model, and more threads would only take cores from STT and the LLM).

    ``model_path``: the ONNX file (default: the one in the ``pipecat-ai`` wheel). Raises
    ModelNotFoundError when it is absent. :meth:`end_of_turn_probability` is thread-safe (ONNX
    Runtime sessions may run from several threads) and is called from the VAD threads of all units.
    The constructor runs one warm-up inference, so the first caller's turn is not the slow one.
    """

    sample_rate = SAMPLE_RATE
    window_samples = WINDOW_SAMPLES

    def __init__(self, model_path: Optional[Path] = None, threads: int = 1) -> None:
        try:
            import onnxruntime
        except ImportError as exc:  # pragma: no cover - install problem
            raise ModelNotFoundError("Smart Turn needs onnxruntime: pip install onnxruntime") from exc
        path = model_path or bundled_model_path()
        if not Path(path).is_file():
            raise ModelNotFoundError(f"Smart Turn model not found: {path}")
        self.weights = on_disk(path)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input = self._session.get_inputs()[0].name
        self.name = "smart-turn-v3.2"
        self.warm_up()

    def end_of_turn_probability(self, audio: np.ndarray) -> float:
        """0..1: how likely the caller has finished the turn whose audio (float32 mono 16 kHz, -1..1,
        ending with the silence heard so far) is ``audio``; only its last 8 s are read."""
        features = log_mel_features(audio)[None, :, :]
        (output,) = self._session.run(None, {self._input: features})
        return float(np.asarray(output).reshape(-1)[0])

    def warm_up(self) -> None:
        """One inference on 1 s of low noise: ONNX Runtime allocates and plans on its first run."""
        noise = np.random.default_rng(0).normal(0.0, 0.01, SAMPLE_RATE).astype(np.float32)
        self.end_of_turn_probability(noise)
