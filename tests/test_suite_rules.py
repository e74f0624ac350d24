"""Rules of the suite itself: a missing optional dependency skips only off CI, and CI (``.ci/run``)
says it is CI, so that nothing it should run is skipped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import helpers
from tests.helpers import require_module

ROOT = Path(__file__).resolve().parents[1]


def test_a_missing_module_skips_off_ci_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.delenv("CI", raising=False)
    # Off CI on a machine not fully set up (scripts/setup.sh records its flags; a fresh clone has them).
    monkeypatch.setattr(helpers, "SETUP_RECORD", tmp_path / "no-setup-record")
    with pytest.raises(pytest.skip.Exception, match="no_such_module_vg"):
        require_module("no_such_module_vg", "pip install it")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        require_module("no_such_module_vg", "pip install it")
    assert require_module("numpy", "pip install numpy").__name__ == "numpy"


def test_no_test_skips_a_missing_import_under_ci() -> None:
    """pytest.importorskip skips silently even in CI, where a missing dependency is a broken install:
    the tests use tests.helpers.require_module (skip off CI, fail under it)."""
    users = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if path.name != Path(__file__).name and "importorskip(" in path.read_text()
    ]
    assert not users, users


def test_ci_run_sets_ci() -> None:
    """Run by hand, .ci/run must still be CI: without CI set, the browser, client, ops and telephony
    tests skip where their tools are missing instead of failing."""
    script = (ROOT / ".ci" / "run").read_text()
    exported = re.search(r"^export CI=(\S+)", script, re.M)
    assert exported and exported.group(1) not in ("", "0", "false"), script
    assert script.index("export CI=") < script.index("pytest")


def test_after_a_full_setup_a_missing_tool_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """scripts/setup.sh --browser --services installs every test's tool: on such a machine the
    README's test command must skip nothing, so a missing tool fails there even without CI."""
    from tests import helpers

    monkeypatch.delenv("CI", raising=False)
    record = tmp_path / "voice-gateway-setup"
    monkeypatch.setattr(helpers, "SETUP_RECORD", record)
    for flags, outcome in (("", pytest.skip.Exception), ("--browser", pytest.skip.Exception)):
        record.write_text(flags + "\n")
        with pytest.raises(outcome):
            helpers.unavailable("chromium is missing")
    record.write_text("--browser --services\n")
    with pytest.raises(pytest.fail.Exception, match=r"setup\.sh --browser --services ran here"):
        helpers.unavailable("chromium is missing")
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'echo "$*" > .venv/voice-gateway-setup' in setup  # the record the helper reads
