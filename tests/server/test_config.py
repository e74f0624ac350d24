"""Configuration: CLI flag > VG_ environment variable > default."""

import pytest

from gateway.cli import build_parser
from gateway.config import GatewayConfig


def test_env_then_flags():
    env = {"VG_POOL_SIZE": "5", "VG_VAD_THRESHOLD": "0.7", "VG_PORT": "9000"}
    args = build_parser().parse_args(["serve", "--port", "9100"])
    config = GatewayConfig.from_args(args, env)
    assert (config.pool_size, config.vad_threshold, config.port) == (5, 0.7, 9100)


def test_bad_env_value_names_the_variable():
    with pytest.raises(ValueError, match="VG_POOL_SIZE"):
        GatewayConfig.from_env({"VG_POOL_SIZE": "many"})


def test_origins_list():
    assert GatewayConfig(allowed_origins="http://a, http://b ,").origins == ["http://a", "http://b"]


def test_talking_capacity_flag_and_its_bounds():
    args = build_parser().parse_args(["serve", "--talking-capacity", "3"])
    assert GatewayConfig.from_args(args, {}).talking_capacity == 3
    assert GatewayConfig().talking_capacity == 0  # measured
    with pytest.raises(ValueError, match="talking_capacity"):
        GatewayConfig(talking_capacity=-1)


def test_serve_off_loopback_wants_an_api_key(monkeypatch, capsys):
    """``voice-gateway serve`` on an address other than loopback, with no API key, stops before
    loading anything (exit 2) unless told ``--allow-no-api-key``: the image binds 0.0.0.0."""
    from gateway.cli import main

    for name in ("VG_API_KEY", "VG_ALLOW_NO_API_KEY", "VG_HOST"):
        monkeypatch.delenv(name, raising=False)
    for host in ("0.0.0.0", "::", "", "192.0.2.1"):
        assert main(["serve", "--host", host, "--llm-model", "/no/such/model.gguf"]) == 2, host
        error = capsys.readouterr().err
        assert "without an API key" in error and "--api-key" in error and "--allow-no-api-key" in error
    # Past the check (loopback, a key, or the explicit flag): the missing model file stops it instead.
    for flags in (
        ["--host", "127.0.0.1"],
        ["--host", "0.0.0.0", "--api-key", "sk-x"],
        ["--host", "::", "--allow-no-api-key", "1"],
    ):
        assert main(["serve", *flags, "--llm-model", "/no/such/model.gguf"]) == 2, flags
        error = capsys.readouterr().err
        assert "without an API key" not in error and "llm_model '/no/such/model.gguf'" in error


def test_serve_refuses_a_source_list_that_is_no_network_before_loading(monkeypatch, capsys):
    """A ``--trusted-proxies`` / ``--unlimited-sources`` entry that is no address or network stops
    ``voice-gateway serve`` at once (exit 2, naming the setting), not with a traceback at start-up."""
    from gateway.cli import main

    for flag in ("--trusted-proxies", "--unlimited-sources"):
        assert main(["serve", flag, "10.0.0.0/8, gateway.example", "--llm-model", "/no/such/model.gguf"]) == 2
        assert f"{flag[2:].replace('-', '_')} 'gateway.example'" in capsys.readouterr().err
