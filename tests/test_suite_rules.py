"""Rules of the suite itself: a missing optional dependency skips only off CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import require_module

ROOT = Path(__file__).resolve().parents[1]


def test_a_missing_module_skips_off_ci_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
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
