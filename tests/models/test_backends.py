"""The one table of model backends (``gateway.models.backends``): what ``load_models`` loads, what
the start-up check refuses and what ``voice-gateway models`` lists all come from its rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config import GatewayConfig
from gateway.models import backends, loader
from gateway.models.backends import (
    STAGES,
    Backend,
    check_backends,
    format_backends,
    list_backends,
    load_backend,
    names,
    selected,
)
from tests.doubles import BlockingLanguageModelDouble, EndOfTurnDouble, SttDouble, TextToSpeechDouble, VadDouble

ROOT = Path(__file__).resolve().parents[2]


def test_each_stage_defaults_to_its_first_row() -> None:
    config = GatewayConfig()
    assert [selected(config, stage).name for stage in STAGES] == [
        "silero",
        "smart_turn",
        "whisper",
        "llama_cpp",
        "piper",
    ]
    for stage in STAGES:
        assert selected(config, stage).name == names(stage)[0]
    assert names("stt") == ("whisper", "openai_http") and names("end_of_turn") == ("smart_turn", "silence")


@pytest.mark.parametrize(
    ("flag", "setting", "choices"),
    [
        ("--stt-backend", "stt_backend", "whisper, openai_http"),
        ("--llm-backend", "llm_backend", "llama_cpp, openai_http, transformers"),
        ("--tts-backend", "tts_backend", "piper, kokoro, kokoro_onnx, openai_http"),
        ("--turn-detector", "turn_detector", "smart_turn, silence"),
    ],
)
def test_an_unknown_backend_is_refused_at_start_naming_the_choices(
    flag: str, setting: str, choices: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def must_not_load(config: GatewayConfig) -> None:
        raise AssertionError("models loaded for a setting that names no backend")

    monkeypatch.setattr(loader, "load_models", must_not_load)
    monkeypatch.delenv("VG_" + setting.upper(), raising=False)
    with pytest.raises(ValueError, match=f"{setting} 'nope' is not one of {choices}$"):
        check_backends(GatewayConfig(**{setting: "nope"}))
    for command in ("serve", "prepare", "models"):
        assert main([command, flag, "nope"]) == 2, command
        error = capsys.readouterr().err
        assert f"bad setting: {setting} 'nope' is not one of {choices}" in error, error


def test_voice_gateway_models_lists_every_row_and_marks_the_selected_ones(capsys: pytest.CaptureFixture[str]) -> None:
    listed = list_backends(GatewayConfig(tts_backend="kokoro_onnx", turn_detector="silence"))
    assert [(b.stage, b.name) for b in listed] == [(row.stage, row.name) for row in backends.BACKENDS]
    assert [(b.stage, b.name) for b in listed if b.selected] == [
        ("vad", "silero"),
        ("end_of_turn", "silence"),
        ("stt", "whisper"),
        ("llm", "llama_cpp"),
        ("tts", "kokoro_onnx"),
    ]
    tts = {b.name: b for b in listed if b.stage == "tts"}
    assert tts["piper"].installed and not tts["piper"].selected  # the offline default is installed
    assert "kokoro_onnx" in format_backends(listed)
    assert main(["models", "--tts-backend", "kokoro", "--stt-backend", "whisper"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["tts", "kokoro"] and " * " in line for line in out), out
    assert any(line.split()[:3] == ["stt", "whisper", "yes"] and " * " in line for line in out), out


def test_a_missing_backend_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    row = Backend(
        "stt", "absent", "an engine whose package is not here", ("vg_no_such_module",), "pip install x", lambda c: None
    )
    monkeypatch.setattr(backends, "BACKENDS", (*backends.BACKENDS, row))
    (status,) = [b for b in list_backends(GatewayConfig(stt_backend="absent")) if b.name == "absent"]
    assert status.selected and not status.installed
    assert status.note == "an engine whose package is not here; not installed: pip install x"


def test_load_models_takes_every_stage_from_its_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A new engine is a row: with a row per stage named "double" (first for the VAD, whose stage has
    no setting), the settings select them and ``load_models`` loads them, warm-up included."""
    llm = BlockingLanguageModelDouble()
    llm.release.set()  # the warm-up's generation returns at once
    made = {"vad": VadDouble(), "end_of_turn": EndOfTurnDouble(0.9), "stt": SttDouble(), "llm": llm}
    made["tts"] = TextToSpeechDouble()
    rows = tuple(
        Backend(stage, "double", "a test double", (), "", lambda config, engine=engine: engine)
        for stage, engine in made.items()
    )
    monkeypatch.setattr(backends, "BACKENDS", (*rows, *backends.BACKENDS))
    config = GatewayConfig(
        turn_detector="double",
        stt_backend="double",
        llm_backend="double",
        tts_backend="double",
        model_cache_dir=str(tmp_path / "cache"),
    )
    models = loader.load_models(config)
    assert (models.vad, models.end_of_turn, models.stt, models.llm, models.tts) == tuple(made.values())
    assert llm.entered.is_set() and made["tts"].calls == [("Hello.", 1.0, None)]  # warmed up
    assert load_backend("stt", config) is made["stt"]
    assert load_backend("end_of_turn", GatewayConfig(turn_detector="silence")) is None


def test_the_table_imports_no_engine() -> None:
    """Listing the backends (what ``voice-gateway models`` does) and checking the settings import
    no engine library: they are found with ``importlib.util.find_spec`` and loaded only by a row's
    loader."""
    script = (
        "import sys\n"
        "from gateway.config import GatewayConfig\n"
        "from gateway.models.backends import check_backends, list_backends\n"
        "check_backends(GatewayConfig())\n"
        "listed = list_backends(GatewayConfig())\n"
        "heavy = ('torch', 'llama_cpp', 'onnxruntime', 'faster_whisper', 'ctranslate2', 'piper', 'kokoro',\n"
        "         'kokoro_onnx', 'transformers', 'openai', 'silero_vad', 'pipecat')\n"
        "print(len(listed), sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(None, 1) == [str(len(backends.BACKENDS)), "[]\n"], done.stdout
