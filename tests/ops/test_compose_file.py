"""docker-compose.yml against the Compose Specification's JSON schema (no Docker engine here), and
its wiring to deploy/nginx.conf: every gateway service has the instance id nginx routes by."""

from __future__ import annotations

import importlib.resources
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
