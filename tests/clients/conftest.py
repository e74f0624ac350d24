"""Fixtures for the stock-client tests: the client venv (``.venv-clients``, made by
scripts/setup_clients.sh, called by scripts/setup.sh) and Node with the Agents SDK for JavaScript
(``.cache/agents-sdk``, made by scripts/build_agents_sdk_bundle.sh, called by ``setup.sh --browser``).

Without them the tests that need them skip, except under CI, where a missing client is a broken
set-up and must fail loudly.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
CLIENT_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
AGENTS_SDK_MODULES = ROOT / ".cache" / "agents-sdk" / "node_modules"


def unavailable(reason: str) -> None:
    """Skip on a machine without the client, fail under CI (which must have it).
    Also fails where scripts/setup.sh --browser --services ran (tests.helpers.unavailable)."""
    helpers.unavailable(reason)


@pytest.fixture(scope="session")
def client_python() -> Path:
    """The client venv's interpreter (pipecat)."""
    if not CLIENT_PYTHON.exists():
        unavailable(f"{CLIENT_PYTHON.relative_to(ROOT)} is missing: run scripts/setup_clients.sh")
    return CLIENT_PYTHON


@pytest.fixture(scope="session")
def agents_sdk_node() -> tuple[str, Path]:
    """(node, the node_modules holding @openai/agents-realtime)."""
    node = shutil.which("node")
    if node is None or not (AGENTS_SDK_MODULES / "@openai" / "agents-realtime").is_dir():
        unavailable("node or .cache/agents-sdk/node_modules is missing: run scripts/build_agents_sdk_bundle.sh")
    return node, AGENTS_SDK_MODULES


async def run_client(*command: str | Path, within: float, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run a client process to its end; returns (exit code, stdout + stderr). Killed after ``within`` s."""
    process = await asyncio.create_subprocess_exec(
        *map(str, command),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        output, _ = await process.communicate()
        return -9, output.decode(errors="replace")
    return process.returncode or 0, output.decode(errors="replace")
