"""Silero VAD (the ONNX model shipped inside the ``silero-vad`` wheel)."""

from __future__ import annotations

import copy
import threading
from importlib import resources
from typing import Any

import numpy as np

from gateway.models.base import ModelNotFoundError
from gateway.models.weights import on_disk

_TORCH_THREADS: list[int] = []  # torch's thread count before silero_vad was first imported


def _torch_threads_before_silero(torch: Any) -> int:
    """torch's intra-op thread count as it was before ``import silero_vad`` set it to 1 (that
    import runs once per process, so the count is remembered for later loads)."""
    if not _TORCH_THREADS:
        _TORCH_THREADS.append(torch.get_num_threads())
    return _TORCH_THREADS[0]


class _SileroStream:
    """One caller's audio stream through the shared model: its own recurrent state and context."""

    def __init__(self, wrapper: Any) -> None:
        import torch

        self._torch = torch
        self._wrapper = wrapper

    def speech_probability(self, chunk: np.ndarray) -> float:
        """0..1 for one float32 chunk, shape (512,), 16 kHz, -1..1. Advances this stream's
        recurrent state: chunks must come in stream order, from one thread."""
        tensor = self._torch.from_numpy(np.ascontiguousarray(chunk, dtype=np.float32))
        return float(self._wrapper(tensor, 16000).item())

    def reset(self) -> None:
        """Clear the recurrent state and context, so the next caller starts from silence."""
        self._wrapper.reset_states()


class SileroVad:
    """Silero VAD v5+: 512-sample chunks at 16 kHz in, speech probability out.

    One ONNX Runtime session is loaded; each :meth:`new_stream` gets a shallow copy of silero's
    wrapper so it keeps its own recurrent state and context but shares the session (ONNX Runtime
    sessions are safe to run from several threads).
    """

    sample_rate = 16000
    chunk_samples = 512

    def __init__(self) -> None:
        try:
            import torch

            threads = _torch_threads_before_silero(torch)
            from silero_vad import load_silero_vad
        except ImportError as exc:  # pragma: no cover - install problem
            raise ModelNotFoundError("silero VAD needs the 'silero-vad' package: pip install silero-vad") from exc
        # The ONNX session itself runs on one intra-op and one inter-op thread (silero's OnnxWrapper).
        self._wrapper = load_silero_vad(onnx=True)
        # the file load_silero_vad(onnx=True) reads: silero_vad.onnx (opset 16) of the package's data
        self.weights = on_disk(str(resources.files("silero_vad.data").joinpath("silero_vad.onnx")))
        # importing silero_vad sets torch to one thread; give torch users (the transformers LLM) theirs back.
        torch.set_num_threads(threads)
        self._lock = threading.Lock()
        self.warm_up()

    def warm_up(self) -> None:
        """Run 10 chunks of low noise through a throw-away stream (ONNX Runtime plans on its first run)."""
        stream = self.new_stream()
        rng = np.random.default_rng(0)
        for _ in range(10):
            stream.speech_probability(rng.normal(0.0, 0.01, self.chunk_samples).astype(np.float32))

    def new_stream(self) -> _SileroStream:
        """A caller's stream: its own state on the shared ONNX session (a reset shallow copy of silero's wrapper).
        Thread-safe (the copy is made under a lock)."""
        with self._lock:
            wrapper = copy.copy(self._wrapper)
            wrapper.reset_states()
        return _SileroStream(wrapper)
