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
