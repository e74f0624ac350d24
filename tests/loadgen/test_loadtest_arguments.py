"""``voice-gateway loadtest`` run as a user runs it, with wrong arguments: each is one line on
stderr naming what is wrong and a non-zero exit (2 for bad input, 1 for a gateway that cannot be
reached or refuses the key), never a traceback, a hang or a run that divides by zero.

Before: ``--callers 0`` (or ``-2``, ``,``) went on to a phase of no callers, ``--turns 0`` ended in
``ZeroDivisionError``, a ``--url`` where nothing listens in an aiohttp ``ClientConnectorError``
traceback after the banner, one that is no URL in ``InvalidUrlClientError``, and a gateway that
refuses the key in a ``PermissionError`` traceback."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from aiohttp import web

from gateway.cli import main
from gateway.server.runner import free_port
from tests.doubles import DrainingGatewayDouble
from tests.loadgen.test_loadtest import write_wav


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write_wav(tmp_path / "quiet.wav", np.zeros(24000, np.int16))


def loadtest(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    """Run the command in process: (exit status, the lines it wrote to stderr)."""
    status = main(["loadtest", *argv])
    return status, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--callers", "0"], "--callers"),
        (["--callers", "-2"], "--callers"),
        (["--callers", ","], "--callers"),
        (["--callers", "2,0,4"], "--callers"),
        (["--turns", "0"], "--turns"),
        (["--think-s", "-1"], "--think-s"),
        (["--stagger-s", "-0.5"], "--stagger-s"),
        (["--silent", "-1"], "--silent"),
        (["--url", "notaurl"], "--url"),
    ],
)
def test_a_wrong_number_or_url_is_one_line_and_exit_2(capsys, recording: Path, flags: list[str], says: str) -> None:
    url = ["--url", f"http://127.0.0.1:{free_port()}"] if "--url" not in flags else []
    status, err = loadtest(capsys, "--speech", str(recording), *url, *flags)
    assert status == 2, err
    assert len(err) == 1 and err[0].startswith("voice-gateway loadtest: ") and says in err[0], err


def test_a_gateway_that_is_not_running_is_one_line_and_exit_1(capsys, recording: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    status, err = loadtest(capsys, "--speech", str(recording), "--url", url, "--no-baseline", "--callers", "1")
    assert status == 1, err
    assert err == [f"voice-gateway loadtest: cannot reach the gateway at {url}: connection refused"], err


@contextlib.contextmanager
def served(app: web.Application) -> Iterator[str]:
    """``app`` served from a thread of its own (the command runs its own event loop): its URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_gateway_that_refuses_the_key_is_one_line_and_exit_1(capsys, recording: Path) -> None:
    with served(DrainingGatewayDouble(drain_polls=0, key="sk-test").app()) as url:
        status, err = loadtest(capsys, "--speech", str(recording), "--url", url, "--api-key", "wrong", "--callers", "1")
    assert status == 1, err
    assert len(err) == 1 and err[0].startswith("voice-gateway loadtest: ") and "401" in err[0], err
    assert "API key" in err[0], err


def test_a_url_of_another_server_is_one_line_and_exit_1(capsys, recording: Path) -> None:
    # Before: every GET answered 404, the run went on to wait for a pool that never came (60 s), then a traceback.
    with served(web.Application()) as url:
        status, err = loadtest(capsys, "--speech", str(recording), "--url", url, "--callers", "1")
    assert status == 1, err
    assert err == [f"voice-gateway loadtest: {url} is no voice gateway: GET /v1/pool answered 404"], err


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--gateway-command", "/nonexistent/python -m gateway serve"], "cannot start the gateway (--gateway-command)"),
        (["--gateway-log", "/nonexistent/folder/gateway.log"], "cannot write the gateway's log"),
    ],
)
def test_a_gateway_that_cannot_be_started_is_one_line_and_exit_1(
    capsys, recording: Path, flags: list[str], says: str
) -> None:
    # Before: a FileNotFoundError traceback from the subprocess or the log file.
    status, err = loadtest(capsys, "--speech", str(recording), "--callers", "1", *flags)
    assert status == 1, err
    assert len(err) == 1 and err[0].startswith(f"voice-gateway loadtest: {says}"), err
