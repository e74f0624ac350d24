"""What an operator sees when ``voice-gateway serve`` cannot start: a one-line message naming the
setting or the address, and an exit status (2: a setting, 1: missing weights or a port), never a
traceback; settings that can be checked without the models are refused before minutes of loading."""

from __future__ import annotations

import socket

import pytest

from gateway.cli import build_parser, main
from gateway.config import GatewayConfig
from gateway.models import loader
from gateway.models.base import ModelNotFoundError
from gateway.server.app import create_app
from gateway.server.runner import free_port
from gateway.server.serving import CannotServe, serve_until_signalled

# A model file that is not there: refused after every other start-up check, before anything loads
# (exit 2), so a test that reaches it loads nothing.
NO_MODEL = ["--llm-model", "/no/such/model.gguf"]


@pytest.fixture(autouse=True)
def _no_vg_environment(monkeypatch):
    for name in ("VG_LOG_LEVEL", "VG_HOST", "VG_PORT", "VG_ICE_SERVERS", "VG_LLM_WARM_SESSION"):
        monkeypatch.delenv(name, raising=False)


def test_an_unknown_log_level_is_a_bad_setting(capsys):
    """``--log-level verbose`` was a traceback from ``logging`` ("Unknown level: 'VERBOSE'")."""
    for command in ("serve", "models"):
        assert main([command, "--log-level", "verbose", *NO_MODEL]) == 2, command
        error = capsys.readouterr().err
        assert "log_level 'verbose'" in error and "INFO" in error and "Traceback" not in error
    assert GatewayConfig(log_level="debug").log_level == "debug"  # any case, as before


def test_a_port_out_of_range_is_a_bad_setting(capsys):
    """``--port 99999`` loaded every model, then failed in ``bind()`` with a traceback."""
    for flag in ("--port", "--sip-port", "--sip-tls-port"):
        assert main(["serve", flag, "99999", *NO_MODEL]) == 2, flag
        assert f"{flag[2:].replace('-', '_')} 99999" in capsys.readouterr().err


def test_a_pool_of_no_unit_or_a_threshold_no_speech_reaches_is_a_bad_setting(capsys):
    """``--pool-size 0`` served, refusing every call (503 pool_full); ``--vad-threshold 5`` served
    and never heard a caller (a probability is at most 1)."""
    for flags, named in ((["--pool-size", "0"], "pool_size 0"), (["--vad-threshold", "5"], "vad_threshold 5.0")):
        assert main(["serve", *flags, *NO_MODEL]) == 2, flags
        assert named in capsys.readouterr().err
    assert GatewayConfig(pool_size=1, vad_threshold=1.0).pool_size == 1


def test_a_bool_flag_says_which_values_it_takes(capsys):
    """argparse named the parser's function: ``invalid _parse_bool value: 'maybe'``."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--allow-no-api-key", "maybe"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "argument --allow-no-api-key: not a boolean: 'maybe'" in error and "_parse_bool" not in error
    assert "true" in error and "off" in error


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--ice-servers", "stun:"], "ice_servers"),
        (["--llm-warm-session", "/no/such/session.json"], "llm_warm_session"),
    ],
)
def test_start_up_settings_are_refused_before_the_models_load(flags, named, capsys):
    """A bad STUN/TURN setting or warm-session file was found by ``create_app``, after the models
    had loaded, and ended ``serve`` with a traceback (exit 1); the missing model here shows that
    nothing was loaded."""
    assert main(["serve", *flags, *NO_MODEL]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"voice-gateway: {named}") and "Traceback" not in error, error


@pytest.mark.slow  # loads the VAD twice: ~2 s
def test_a_setting_an_engine_refuses_is_a_bad_setting(capsys):
    """``--tts-response-format mp3`` raised ValueError out of the model loading: a traceback."""
    http = ["--stt-backend", "openai_http", "--llm-backend", "openai_http", "--tts-backend", "openai_http"]
    for command in ("serve", "prepare"):
        assert main([command, *http, "--turn-detector", "silence", "--tts-response-format", "mp3"]) == 2
        error = capsys.readouterr().err
        assert "bad setting: response_format 'mp3'" in error and "wav" in error, error


async def test_a_taken_port_is_named_not_a_traceback(models, gateway_config):
    """The HTTP port taken by another process: aiohttp's OSError came out of ``serve`` as a
    traceback; now :class:`CannotServe` (exit 1) names the address and the flags."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = gateway_config()
        with pytest.raises(CannotServe) as refused:
            await serve_until_signalled(create_app(config, models=models), "127.0.0.1", port)
    assert refused.value.status == 1
    message = str(refused.value)
    assert f"http://127.0.0.1:{port}" in message and "--port" in message and "in use" in message


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sip-rtp-latch", "bogus"], "sip_rtp_latch 'bogus': use signalling, sdp, any"),
        (["--sip-rtp-ports", "5-6"], "sip_rtp_ports '5-6': a range within 1024..65535"),
        (["--sip-trusted", "trunk.example"], "sip_trusted 'trunk.example': use IP addresses or CIDR networks"),
        (["--sip-srtp", "maybe"], "sip_srtp 'maybe': use auto, required, optional, off"),
        (
            ["--sip-webhook-url", "http://127.0.0.1:9/hook", "--sip-webhook-secret", "secret"],
            "sip_webhook_secret: a webhook secret starts with 'whsec_'",
        ),
        (["--host", "0.0.0.0", "--api-key", "sk-x"], "SIP listens on every address: give --sip-public-address"),
    ],
)
def test_sip_settings_are_refused_before_the_models_load(flags, message, capsys):
    """A SIP setting was read when the SIP user agent started, after the models had loaded (tens
    of seconds), then ended ``serve`` in a traceback (later: one line, exit 2, still after loading).
    Now one line, exit 2, before loading: ``NO_MODEL`` is not reached, and no port is bound."""
    assert main(["serve", "--sip-port", str(free_port()), *flags, *NO_MODEL]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"voice-gateway: {message}") and "Traceback" not in error, error
    assert "llm_model" not in error


@pytest.mark.parametrize(
    ("model", "why"),
    [("/no/such/model.gguf", "no such file"), ("qwen9", "neither a bundled model nor a .gguf file")],
)
def test_a_bad_llm_model_names_the_setting_before_the_models_load(model, why, capsys, monkeypatch):
    """``--llm-model /nope.gguf`` loaded VAD and STT, then said "GGUF file /nope.gguf does not
    exist" (exit 1); ``qwen9`` named ``llm_backend``, not the model's setting. Now one line naming
    ``llm_model`` and its flag, exit 2, before any model loads (as the other start-up settings)."""
    loaded: list[str] = []
    monkeypatch.setattr(loader, "load_backend", lambda stage, config: loaded.append(stage))
    for command in ("serve", "prepare"):
        assert main([command, "--llm-model", model]) == 2, command
        error = capsys.readouterr().err
        assert f"llm_model {model!r} (--llm-model): {why}" in error, error
        assert "qwen2.5-coder-1.5b" in error and ".gguf" in error and "Traceback" not in error
    assert loaded == []


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("/no/such/model.gguf", "no such file"),
        ("/no/such/folder", "no such directory, nor a model id in the local Hugging Face cache"),
        ("qwen2.5-coder-1.5b", "no such directory, nor a model id in the local Hugging Face cache"),  # llama_cpp's
        ("EMPTY_FOLDER", "a directory without config.json"),
    ],
)
def test_a_bad_transformers_model_names_the_setting_before_the_models_load(model, why, capsys, monkeypatch, tmp_path):
    """``--llm-backend transformers`` with a model it cannot load (a ``.gguf`` or a folder that is
    not there, a folder with no model, the llama_cpp default ``qwen2.5-coder-1.5b``) loaded VAD and
    STT first, then failed (exit 1: "GGUF file ... does not exist", or ``from_pretrained``'s
    OSError). Now one line naming ``llm_model`` and its flag, exit 2, before any model loads."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # offline, as load_models sets it
    if model == "EMPTY_FOLDER":
        model = str(tmp_path)
    loaded: list[str] = []

    def load(stage, config):
        loaded.append(stage)
        raise ModelNotFoundError(f"{stage} loaded")

    monkeypatch.setattr(loader, "load_backend", load)
    for command in ("serve", "prepare"):
        assert main([command, "--llm-backend", "transformers", "--llm-model", model]) == 2, command
        error = capsys.readouterr().err
        assert f"llm_model {model!r} (--llm-model): {why}" in error, error
        assert "smollm2-135m" in error and "Traceback" not in error
    assert loaded == []


def test_a_transformers_model_it_can_load_passes_the_check(tmp_path):
    """The check refuses no model the backend loads: the bundled name, a model directory."""
    from gateway.models.transformers_llm import check_model_setting

    (tmp_path / "config.json").write_text("{}")
    for model in ("smollm2-135m", str(tmp_path)):
        check_model_setting(model)
