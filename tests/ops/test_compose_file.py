"""docker-compose.yml against the Compose Specification's JSON schema (no Docker engine here), and
its wiring to deploy/nginx.conf: every gateway service has the instance id nginx routes by. What
it and the Dockerfile expose: an API key and a TURN password required (none in the repository),
no browser origin listed, coturn's peers limited to the gateways' fixed media addresses
(tests/ops/test_coturn_peers.py runs those rules in a real coturn)."""

from __future__ import annotations

import importlib.resources
import ipaddress
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose_spec_schema() -> dict:
    """The Compose Specification schema (compose-spec/compose-spec ``schema/compose-spec.json``,
    Apache-2.0) as the ``check-jsonschema`` package vendors it (a test dependency)."""
    try:
        vendor = importlib.resources.files("check_jsonschema") / "builtin_schemas" / "vendor"
    except ModuleNotFoundError:
        pytest.fail("check-jsonschema is not installed: pip install -e '.[test]'")
    return json.loads((vendor / "compose-spec.json").read_text())


def load_compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_file_is_valid_against_the_compose_specification():
    schema = compose_spec_schema()
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(load_compose()), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_the_schema_catches_a_broken_file():
    """The check is real: a misspelt key and a wrong type are reported."""
    schema = compose_spec_schema()
    broken = load_compose()
    broken["services"]["nginx"]["portz"] = ["8080:80"]
    broken["services"]["coturn"]["command"] = 3478
    errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))
    assert len(errors) >= 2


def test_gateways_nginx_routes_and_the_llm_server_profile():
    compose = load_compose()
    services = compose["services"]
    nginx_conf = (ROOT / "deploy" / "nginx.conf").read_text()
    gateways = {name: spec for name, spec in services.items() if spec.get("environment", {}).get("VG_INSTANCE_ID")}
    assert len(gateways) >= 2
    for name, spec in gateways.items():
        instance = spec["environment"]["VG_INSTANCE_ID"]
        assert re.search(rf"^\s*{re.escape(instance)}\s+\w+;", nginx_conf, re.M), f"nginx does not route {instance}"
        assert f"server {name}:8080" in nginx_conf, f"nginx has no upstream for {name}"
        assert spec["stop_signal"] == "SIGTERM"
        grace = float(spec["environment"]["VG_SHUTDOWN_GRACE_S"])
        assert int(spec["stop_grace_period"].rstrip("s")) > grace, "compose would SIGKILL mid-drain"
        json.loads(spec["environment"]["VG_ICE_SERVERS"])  # the RTCIceServer JSON shape parses
    assert services["llm-server"]["profiles"] == ["llm-server"]
    assert "llama_cpp.server" in services["llm-server"]["command"]


def required(variable: str, value: str) -> bool:
    """Whether ``value`` is Compose's required interpolation of ``variable`` (``${VAR:?message}``:
    ``docker compose`` stops with the message when it is unset or empty)."""
    return re.search(rf"\$\{{{variable}:\?[^}}]+\}}", value) is not None


def test_compose_requires_an_api_key_and_a_turn_password_and_lists_no_origin():
    compose = load_compose()
    services = compose["services"]
    gateways = {name: spec for name, spec in services.items() if spec.get("environment", {}).get("VG_INSTANCE_ID")}
    for spec in gateways.values():
        environment = spec["environment"]
        assert required("VG_API_KEY", environment["VG_API_KEY"]), environment["VG_API_KEY"]
        assert environment["VG_ALLOWED_ORIGINS"] in ("", "${VG_ALLOWED_ORIGINS:-}"), "no origin allowed by default"
        (server,) = json.loads(environment["VG_ICE_SERVERS"])
        assert required("VG_TURN_PASSWORD", server["credential"]), server  # no credential in the repository
    users = [flag for flag in services["coturn"]["command"] if flag.startswith("--user=")]
    assert len(users) == 1 and users[0].startswith(f"--user={server['username']}:"), users
    assert required("VG_TURN_PASSWORD", users[0]), users


def test_coturn_relays_to_the_gateways_fixed_addresses_only():
    compose = load_compose()
    subnet = ipaddress.ip_network(compose["networks"]["default"]["ipam"]["config"][0]["subnet"])
    services = compose["services"]
    addresses = {
        spec["networks"]["default"]["ipv4_address"]
        for spec in services.values()
        if spec.get("environment", {}).get("VG_INSTANCE_ID")
    }
    assert len(addresses) >= 2 and all(ipaddress.ip_address(a) in subnet for a in addresses), addresses
    command = services["coturn"]["command"]
    allowed = {flag.split("=", 1)[1] for flag in command if flag.startswith("--allowed-peer-ip=")}
    assert allowed == addresses, (allowed, addresses)
    denied = [flag.split("=", 1)[1].split("-") for flag in command if flag.startswith("--denied-peer-ip=")]
    ranges = [(ipaddress.ip_address(r[0]), ipaddress.ip_address(r[-1])) for r in denied]

    def is_denied(address: str) -> bool:
        ip = ipaddress.ip_address(address)
        return any(low.version == ip.version and low <= ip <= high for low, high in ranges)

    assert is_denied(str(subnet.network_address + 2)) and all(is_denied(a) for a in addresses)  # allowed beats denied
    for private in ("10.0.0.1", "172.16.0.1", "192.168.0.1", "127.0.0.1", "169.254.169.254", "100.64.0.1", "fd00::1"):
        assert is_denied(private), private
    assert "--no-tcp-relay" in command and "--no-multicast-peers" in command


def test_the_image_needs_an_api_key_to_serve():
    """The Dockerfile binds 0.0.0.0 and sets no key, so ``serve`` stops unless the container gets
    VG_API_KEY (tests/server/test_config.py: off loopback, no key, exit 2)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    env_lines = [line for line in dockerfile.splitlines() if line.startswith("ENV ")]
    assert any("VG_HOST=0.0.0.0" in line for line in env_lines), env_lines
    assert not any("VG_API_KEY" in line or "VG_ALLOW_NO_API_KEY" in line for line in env_lines), env_lines
