"""Packaged GGUF parts: joined once, atomically, every part and the whole checked against its pin."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gateway.config import GatewayConfig
from gateway.models.base import ModelNotFoundError
from gateway.models.llama_cpp.gguf_bundles import BUNDLES, DEFAULT_LLM, GgufBundle, GgufPart, bundled_gguf


def make_bundle(root: Path, monkeypatch: pytest.MonkeyPatch, pieces: list[bytes]) -> GgufBundle:
    parts = []
    for i, data in enumerate(pieces, start=1):
        folder = root / f"vg_test_part{i}" / "data"
        folder.mkdir(parents=True)
        (folder.parent / "__init__.py").write_text("")
        (folder / f"part{i:02d}.bin").write_bytes(data)
        parts.append(
            GgufPart(
                f"vg-test-part{i}", f"vg_test_part{i}", f"part{i:02d}.bin", hashlib.sha256(data).hexdigest(), len(data)
            )
        )
    monkeypatch.syspath_prepend(str(root))
    whole = hashlib.sha256(b"".join(pieces)).hexdigest()
    bundle = GgufBundle("test-model", "test-model.gguf", tuple(parts), whole, "MIT")
    monkeypatch.setitem(BUNDLES, bundle.name, bundle)
    return bundle


def test_parts_are_joined_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_bundle(tmp_path / "site", monkeypatch, [b"GGUF" + b"a" * 1000, b"b" * 500, b"c" * 7])
    cache = tmp_path / "cache"
    joined = bundled_gguf("test-model", cache)
    assert joined.read_bytes() == b"GGUF" + b"a" * 1000 + b"b" * 500 + b"c" * 7
    mtime = os.stat(joined).st_mtime_ns
    assert bundled_gguf("test-model", cache) == joined and os.stat(joined).st_mtime_ns == mtime
    assert [p.name for p in cache.iterdir()] == ["test-model.gguf"], "no partial file is left behind"


def test_an_altered_part_is_refused_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_bundle(tmp_path / "site", monkeypatch, [b"GGUF" + b"a" * 100, b"b" * 100])
    (tmp_path / "site" / "vg_test_part2" / "data" / "part02.bin").write_bytes(b"x" * 100)
    cache = tmp_path / "cache"
    with pytest.raises(ModelNotFoundError, match="vg-test-part2"):
        bundled_gguf("test-model", cache)
    assert not any(cache.iterdir())


def test_a_missing_part_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = make_bundle(tmp_path / "site", monkeypatch, [b"GGUF"])
    missing = GgufPart("vg-absent-part", "vg_absent_part", "part02.bin", "0" * 64, 1)
    monkeypatch.setitem(
        BUNDLES,
        bundle.name,
        GgufBundle(bundle.name, bundle.file_name, (*bundle.parts, missing), bundle.sha256, bundle.licence),
    )
    with pytest.raises(ModelNotFoundError, match="vg-absent-part is not installed"):
        bundled_gguf("test-model", tmp_path / "cache")


def test_the_default_model_is_pinned_and_joined(models: object) -> None:
    """The session's models run the default LLM, so its 22 parts were joined (and checked) already."""
    bundle = BUNDLES[DEFAULT_LLM]
    assert len(bundle.parts) == 22 and bundle.size == 1117320768
    assert all(len(p.sha256) == 64 for p in bundle.parts) and len(bundle.sha256) == 64
    path = bundled_gguf(DEFAULT_LLM, Path(GatewayConfig().model_cache_dir))
    assert path.stat().st_size == bundle.size
    with open(path, "rb") as model:
        assert model.read(4) == b"GGUF"
