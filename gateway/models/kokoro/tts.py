"""Kokoro-82M text-to-speech on hexgrad's ``kokoro`` package (``KModel``, torch), 24 kHz mono.

The model is a folder in the layout of the hub repository ``hexgrad/Kokoro-82M``::

    config.json        architecture and phoneme vocabulary (KModel's ``config``)
    kokoro-v1_0.pth    weights: {"bert", "bert_encoder", "predictor", "text_encoder", "decoder"} state dicts
    voices/NAME.pt     one style tensor per voice, shape (510, 1, 256): row n-1 styles n phonemes

given as ``--tts-model DIR``, or a hub id (``hexgrad/Kokoro-82M``) resolved through the local hub
cache, downloaded only where a hub is reachable and ``HF_HUB_OFFLINE=0``. No English Kokoro weights
ship in any package, so nothing is bundled: a missing model raises ModelNotFoundError with what to
pass. The weights are loaded once per process by the same ``KModel(config=..., model=...)`` call
kokoro's own ``KPipeline`` makes, on CUDA when torch sees one.

Text is phonemised by misaki offline (:mod:`gateway.models.kokoro.g2p`), one sentence at a time, and
each sentence is yielded as soon as it is synthesized, as Piper does. The session's voice name maps
to a Kokoro voice by the table in :mod:`gateway.models.kokoro.voices`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gateway.models.base import ModelNotFoundError
from gateway.models.kokoro.g2p import EnglishPhonemizer, split_sentences
from gateway.models.kokoro.voices import DEFAULT_TORCH_VOICE, TORCH_COLUMN, resolve_voice
from gateway.models.weights import on_disk

log = logging.getLogger(__name__)

SAMPLE_RATE = 24_000  # Hz: Kokoro's decoder makes 600 samples per duration frame
HUB_REPO = "hexgrad/Kokoro-82M"
WEIGHTS_FILE = "kokoro-v1_0.pth"
INSTALL_HINT = (
    "scripts/setup.sh installs the kokoro package (or: pip install --no-deps kokoro misaki, then "
    "pip install -e '.[kokoro]'); the weights are not packaged: pass --tts-model DIR holding config.json, "
    f"{WEIGHTS_FILE} and voices/*.pt (the {HUB_REPO} layout), or a hub id with HF_HUB_OFFLINE=0 and a reachable hub"
)
SPEED_RANGE = (0.25, 4.0)  # Realtime audio.output.speed is 0.25..1.5


def model_files(model: str) -> tuple[Path, Path, Path]:
    """(config.json, weights .pth, voices folder) of ``model``: a local folder, or a hub id looked up
    in the hub cache (fetched only when the hub is online). Raises ModelNotFoundError."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        if model.startswith((".", "/", "~")) or model.count("/") != 1:
            raise ModelNotFoundError(f"Kokoro model folder {model!r} not found: {INSTALL_HINT}")
        folder = _hub_snapshot(model)
    config = folder / "config.json"
    weights = folder / WEIGHTS_FILE
    if not weights.exists():
        found = sorted(folder.glob("*.pth"))
        weights = found[0] if found else weights
    voices = folder / "voices"
    for needed in (config, weights, voices):
        if not needed.exists():
            raise ModelNotFoundError(f"Kokoro model {model!r} has no {needed.name}: {INSTALL_HINT}")
    return config, weights, voices


def _hub_snapshot(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, allow_patterns=["config.json", "*.pth", "voices/*.pt"]))
    except Exception as exc:  # offline, unknown repo, no cache: all mean "not installed here"
        raise ModelNotFoundError(f"Kokoro model {repo_id!r} is not in the hub cache ({exc}): {INSTALL_HINT}") from exc


class KokoroTextToSpeech:
    """Sentence-by-sentence Kokoro-82M synthesis; yields float32 mono at 24 kHz. Thread-safe.

    ``model``: a model folder or hub id (see the module docstring). ``voice``: the default voice, a
    Kokoro voice name of ``voices/`` or an OpenAI name; "" or an unknown name: ``af_heart`` when the
    model has it, else its first voice. ``device``: ``"auto"`` (CUDA when torch sees one), ``"cpu"``
    or ``"cuda"``. Raises ModelNotFoundError when the package or the model files are missing.
    """

    sample_rate = SAMPLE_RATE

    def __init__(self, model: str = HUB_REPO, voice: str = "", device: str = "auto") -> None:
        config, weights, voices = model_files(model)  # first: a missing model fails fast
        try:
            import torch
            from kokoro import KModel
        except ImportError as exc:
            raise ModelNotFoundError(f"the kokoro package is not installed ({exc}): {INSTALL_HINT}") from exc
        self._voice_files = {path.stem: path for path in sorted(voices.glob("*.pt"))}
        if not self._voice_files:
            raise ModelNotFoundError(f"Kokoro model {model!r} has no voices/*.pt: {INSTALL_HINT}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self._torch = torch
        # The call KPipeline makes; repo_id only names the model (nothing is fetched with files given).
        self._model = KModel(repo_id=HUB_REPO, config=str(config), model=str(weights)).to(device).eval()
        self._packs: dict[str, Any] = {}
        self._phonemizers: dict[bool, EnglishPhonemizer] = {}
        self._lock = threading.Lock()
        fallback = DEFAULT_TORCH_VOICE if DEFAULT_TORCH_VOICE in self._voice_files else next(iter(self._voice_files))
        self.voice = resolve_voice(voice, self._voice_files, TORCH_COLUMN, fallback)
        self.model_name = model
        self.weights = on_disk(weights)
        log.info("Kokoro %s on %s, %d voices, default %s", model, device, len(self._voice_files), self.voice)

    @property
    def voices(self) -> list[str]:
        """The Kokoro voice names this model has (``voices/*.pt``)."""
        return list(self._voice_files)

    def resolve(self, voice: Optional[str]) -> str:
        """The Kokoro voice that speaks for a session's ``voice`` name (None: the default)."""
        return resolve_voice(voice, self._voice_files, TORCH_COLUMN, self.voice)

    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        """Yield float32 mono (-1..1) at 24 kHz, one array per sentence of ``text`` as each is ready.

        ``speed`` is the Realtime ``audio.output.speed`` factor (1.0 normal), clamped to 0.25..4.0;
        ``voice`` a session's voice name (OpenAI or Kokoro), None for the default voice.
        """
        name = self.resolve(voice)
        pack = self._pack(name)
        phonemize = self._phonemizer(british=name.startswith("b"))
        speed = max(SPEED_RANGE[0], min(float(speed), SPEED_RANGE[1]))
        for sentence in split_sentences(text):
            for phonemes in phonemize(sentence):
                with self._torch.inference_mode():
                    audio = self._model(phonemes, pack[len(phonemes) - 1], speed)
                yield audio.detach().to("cpu", self._torch.float32).numpy().reshape(-1)

    def _pack(self, name: str) -> Any:
        with self._lock:
            pack = self._packs.get(name)
            if pack is None:
                loaded = self._torch.load(self._voice_files[name], map_location="cpu", weights_only=True)
                pack = self._packs[name] = loaded.to(self.device)
            return pack

    def _phonemizer(self, british: bool) -> EnglishPhonemizer:
        with self._lock:
            phonemizer = self._phonemizers.get(british)
            if phonemizer is None:
                phonemizer = self._phonemizers[british] = EnglishPhonemizer(british=british)
            return phonemizer
