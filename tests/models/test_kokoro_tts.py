"""The ``kokoro`` backend (hexgrad's KModel on torch) on a checkpoint the test makes: the real KModel
architecture from a config.json, small random weights, saved in the Kokoro-82M folder layout and
loaded through the path users take (``--tts-backend kokoro --tts-model DIR``). No English Kokoro
weights are installable offline, so this checks the loading and streaming code, not the voice."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.models.base import ModelNotFoundError
from tests.helpers import require_module

KOKORO_INSTALL = "scripts/setup.sh installs the kokoro extra and hexgrad's kokoro and misaki"

torch = require_module("torch", KOKORO_INSTALL)
require_module("kokoro", KOKORO_INSTALL)
require_module("espeakng_loader", KOKORO_INSTALL)

SAMPLES_PER_FRAME = 600  # Kokoro's decoder: 24 kHz / 40 duration frames per second
MAX_DUR = 50  # frames a phoneme may last at most (config max_dur)


def _vocab() -> dict[str, int]:
    """Kokoro-82M's phoneme vocabulary (178 symbols), as kokoro-onnx ships it."""
    onnx_config = require_module("kokoro_onnx.config", KOKORO_INSTALL)
    return dict(onnx_config.DEFAULT_VOCAB)


def _config() -> dict:
    # Kokoro-82M's config with the sizes that are free to shrink made small. hidden_dim 512 and
    # upsample_initial_channel 512 are fixed by the decoder's hard-coded channels; style_dim 128 by
    # the 256-wide voice packs; the upsampling (10 * 6 * hop 5, doubled) fixes 600 samples a frame.
    return {
        "istftnet": {
            "upsample_kernel_sizes": [20, 12],
            "upsample_rates": [10, 6],
            "gen_istft_hop_size": 5,
            "gen_istft_n_fft": 20,
            "resblock_dilation_sizes": [[1, 3, 5]],
            "resblock_kernel_sizes": [3],
            "upsample_initial_channel": 512,
        },
        "dim_in": 64,
        "dropout": 0.0,
        "hidden_dim": 512,
        "max_conv_dim": 512,
        "max_dur": MAX_DUR,
        "multispeaker": True,
        "n_layer": 1,
        "n_mels": 80,
        "n_token": 178,
        "style_dim": 128,
        "text_encoder_kernel_size": 5,
        "plbert": {
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 512,
            "num_hidden_layers": 1,
            "dropout": 0.1,
        },
        "vocab": _vocab(),
    }


@pytest.fixture(scope="module")
def kokoro_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Kokoro-82M folder (config.json, kokoro-v1_0.pth, voices/af_heart.pt, voices/am_echo.pt)
    with random weights, in float16 like a slimmed release (~115 MB)."""
    from kokoro import KModel

    folder = tmp_path_factory.mktemp("kokoro-82m-random")
    (folder / "config.json").write_text(json.dumps(_config()))
    torch.manual_seed(0)
    # KModel always loads a state dict: an empty one leaves the freshly initialised (random) weights.
    with mock.patch("torch.load", return_value={}):
        model = KModel(repo_id="hexgrad/Kokoro-82M", config=str(folder / "config.json"), model="none")
    with torch.no_grad():  # short phonemes (~2.4 frames each) keep the random speech short and quick
        model.predictor.duration_proj.linear_layer.bias.fill_(-3.0)
    checkpoint = {
        name: {k: v.half() if v.is_floating_point() else v for k, v in getattr(model, name).state_dict().items()}
        for name in ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
    }
    torch.save(checkpoint, folder / "kokoro-v1_0.pth")
    (folder / "voices").mkdir()
    for voice in ("af_heart", "am_echo"):
        torch.save(torch.randn(510, 1, 256) * 0.1, folder / "voices" / f"{voice}.pt")
    return folder


@pytest.fixture(scope="module")
def kokoro(kokoro_dir: Path):  # -> KokoroTextToSpeech
    from gateway.models.backends import load_backend

    return load_backend("tts", GatewayConfig(tts_backend="kokoro", tts_model=str(kokoro_dir)))


def test_loads_the_folder_and_streams_one_array_per_sentence_at_24khz(kokoro) -> None:
    assert kokoro.sample_rate == 24000
    assert kokoro.voice == "af_heart" and sorted(kokoro.voices) == ["af_heart", "am_echo"]
    pieces = list(kokoro.synthesize("Hello there. How are you?"))
    assert len(pieces) == 2  # sentence by sentence, like Piper
    for piece in pieces:
        assert piece.dtype == np.float32 and piece.ndim == 1 and np.isfinite(piece).all()
        # Whole duration frames, at least one and at most max_dur per phoneme (+2 pads) of the sentence.
        assert len(piece) % SAMPLES_PER_FRAME == 0
        assert 3 * SAMPLES_PER_FRAME <= len(piece) <= 40 * MAX_DUR * SAMPLES_PER_FRAME


def test_speed_shortens_the_audio_and_any_voice_name_is_served(kokoro) -> None:
    normal = np.concatenate(list(kokoro.synthesize("Good morning.", speed=1.0)))
    fast = np.concatenate(list(kokoro.synthesize("Good morning.", speed=2.0, voice="echo")))
    assert len(fast) < 0.8 * len(normal)
    assert kokoro.resolve("echo") == "am_echo"  # OpenAI name -> its Kokoro voice (the table)
    assert kokoro.resolve("am_echo") == "am_echo"  # a Kokoro name as given
    assert kokoro.resolve("shimmer") == "af_heart"  # mapped voice (af_bella) not in this model: default
    assert kokoro.resolve(None) == "af_heart"


def test_missing_model_fails_at_start_up_with_the_install_hint(tmp_path: Path) -> None:
    from gateway.models.kokoro.tts import KokoroTextToSpeech

    with pytest.raises(ModelNotFoundError, match="--tts-model DIR"):
        KokoroTextToSpeech(str(tmp_path / "nowhere"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelNotFoundError, match=r"config\.json"):
        KokoroTextToSpeech(str(empty))
