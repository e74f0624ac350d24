"""What ``voice-gateway serve`` says at start about its settings, as an operator deploying it with
``VG_*`` variables and flags reads it: a ``VG_*`` name that is no setting (a typo) is warned about,
with the setting it is closest to, instead of being silently ignored; the settings other than the
defaults are logged in one line (secrets as ``[set]``). And every ``VG_*`` name the repository's
docs, compose file and scripts use is a setting or one of the few variables read elsewhere
(``gateway.config_sources.OTHER_VARIABLES``)."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest

from gateway.cli import main
from gateway.config import GatewayConfig

# A model file that is not there: ``serve`` stops (exit 2) after logging is set up, before anything loads.
NO_MODEL = ["--llm-model", "/no/such/model.gguf", "--log-level", "INFO", "--host", "127.0.0.1"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _only_these_variables(monkeypatch):
    for name in [k for k in os.environ if k.startswith("VG_")]:
        monkeypatch.delenv(name)


def _warned(error: str) -> list[str]:
    return [line for line in error.splitlines() if "is no setting" in line]


def test_serve_warns_once_per_unknown_variable_naming_the_closest_setting(monkeypatch, capsys):
    """``VG_TALKING_CAPACTY=6`` and ``VG_POOLSIZE=4`` were ignored without a word: the operator
    believed the gateway took 6 talking callers on a pool of 4."""
    monkeypatch.setenv("VG_TALKING_CAPACTY", "6")
    monkeypatch.setenv("VG_POOLSIZE", "4")
    monkeypatch.setenv("VG_FROBNICATE", "1")
    monkeypatch.setenv("VG_POOL_SIZE", "3")  # a setting: read, not warned about
    assert main(["serve", *NO_MODEL]) == 2
    warned = _warned(capsys.readouterr().err)
    assert len(warned) == 3, warned
    frob, pool, talking = warned  # sorted by name
    assert "WARNING" in talking and "VG_TALKING_CAPACTY" in talking and "did you mean VG_TALKING_CAPACITY?" in talking
    assert "VG_POOLSIZE" in pool and "did you mean VG_POOL_SIZE?" in pool
    assert "VG_FROBNICATE" in frob and "did you mean" not in frob


def test_the_warning_is_a_json_log_line_with_json_logs(monkeypatch, capsys):
    monkeypatch.setenv("VG_LOG_FORMAT", "json")
    monkeypatch.setenv("VG_POOLSIZE", "4")
    assert main(["serve", *NO_MODEL]) == 2
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    warned = [line for line in lines if "is no setting" in line["message"]]
    assert len(warned) == 1, lines
    assert warned[0]["level"] == "WARNING" and "did you mean VG_POOL_SIZE?" in warned[0]["message"]


def test_variables_the_project_reads_are_not_warned_about(monkeypatch, capsys):
    """Settings (``VG_API_KEY``, ``VG_LLM_TURN_BUDGET_S``, ``VG_TURN_DETECTOR``) and the variables of
    docker-compose.yml and scripts/setup.sh (``VG_TURN_PASSWORD``, ``VG_WHEEL_CACHE``)."""
    for name, value in {
        "VG_API_KEY": "sk-test-key",
        "VG_LLM_TURN_BUDGET_S": "20",
        "VG_TURN_DETECTOR": "silence",
        "VG_TURN_PASSWORD": "secret123",
        "VG_WHEEL_CACHE": "/tmp/wheels",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["serve", *NO_MODEL]) == 2
    error = capsys.readouterr().err
    assert "llm_model '/no/such/model.gguf'" in error  # stopped after logging was set up: it would have warned
    assert _warned(error) == []


def test_serve_logs_the_settings_other_than_the_defaults(monkeypatch, capsys):
    """Nothing said which settings a start took: an operator could not tell whether
    ``VG_POOL_SIZE=3`` from the compose file applied, nor that a flag overrode it."""
    monkeypatch.setenv("VG_POOL_SIZE", "3")
    monkeypatch.setenv("VG_TALKING_CAPACITY", "5")
    monkeypatch.setenv("VG_LLM_API_KEY", "sk-llm-secret-value")
    assert main(["serve", *NO_MODEL, "--talking-capacity", "6", "--stt-api-key", "sk-stt-secret-value"]) == 2
    error = capsys.readouterr().err
    lines = [line for line in error.splitlines() if "settings other than the defaults:" in line]
    assert len(lines) == 1, error
    line = lines[0]
    assert "INFO" in line and "pool_size=3" in line and "talking_capacity=6" in line  # the flag won
    assert "llm_model=/no/such/model.gguf" in line
    assert "llm_api_key=[set]" in line and "stt_api_key=[set]" in line and "secret-value" not in error
    assert not re.search(r"\bport=", line) and "log_level" not in line  # defaults (INFO, 8080) left out


def test_the_settings_line_never_shows_a_turn_credential_nor_a_key(monkeypatch, capsys):
    """The compose file's ``VG_ICE_SERVERS`` holds the TURN password in its JSON: the first version
    of the settings line printed its first 60 characters, the password with a short URL."""
    ice = '[{"urls":"turn:t:3478","username":"v","credential":"turnpw-secret-value"}]'
    monkeypatch.setenv("VG_ICE_SERVERS", ice)
    monkeypatch.setenv("VG_TTS_API_KEY", "sk-tts-secret-value")
    monkeypatch.setenv("VG_SIP_WEBHOOK_SECRET", "whsec-secret-value")
    assert main(["serve", *NO_MODEL]) == 2
    error = capsys.readouterr().err
    assert "ice_servers=[set]" in error and "tts_api_key=[set]" in error, error
    assert "secret-value" not in error, error
    logging.getLogger("gateway.test").warning("a line holding sk-tts-secret-value and whsec-secret-value")
    assert "secret-value" not in capsys.readouterr().err, "every key and secret setting is redacted in the log"


def test_every_vg_name_in_the_docs_compose_and_scripts_is_read():
    """A ``VG_*`` name the README, DEPLOYMENT, CONTRIBUTING, the compose file, the Dockerfile,
    deploy/ or scripts/ names must be a setting (or read elsewhere): a name the docs keep after a
    setting is renamed would be warned about at every start. (docs/BENCHMARKS.md is a history.)"""
    from gateway.config_sources import unknown_variables

    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "docs" / "DEPLOYMENT.md"]
    files += [ROOT / "docker-compose.yml", ROOT / "Dockerfile"]
    for folder in ("deploy", "scripts"):
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix not in (".pyc", ".wav", ".png")]
    named = {}
    for path in files:
        for name in re.findall(r"\bVG_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")):
            named.setdefault(name, str(path.relative_to(ROOT)))
    assert "VG_POOL_SIZE" in named and "VG_API_KEY" in named
    named.pop("VG_POOLSIZE", None)  # the README's example of the warning
    unread = unknown_variables(GatewayConfig, named)
    assert unread == [], [(message, named[message.split()[0]]) for message in unread]
