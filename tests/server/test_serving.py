"""``voice-gateway serve`` as an operator reads it: the address it prints and logs once listening,
and the flags' help (each flag's default and variable)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time

import aiohttp
import pytest

from gateway import cli
from gateway.cli import build_parser
from gateway.server.app import create_app
from gateway.server.serving import serve_until_signalled
from tests.helpers import wait_until


async def test_serve_on_port_0_prints_and_logs_the_port_it_listens_on(models, gateway_config, capsys, caplog):
    """``serve --port 0`` printed ``serving on http://127.0.0.1:0``: a port no one can call. The
    kernel's port is printed and logged, and answers."""
    caplog.set_level(logging.INFO, logger="gateway.server.serving")
    loop = asyncio.get_running_loop()
    serving = asyncio.ensure_future(serve_until_signalled(create_app(gateway_config(), models=models), "127.0.0.1", 0))
    printed: list[str] = []

    def said() -> bool:
        printed.append(capsys.readouterr().out)
        return "serving on" in "".join(printed)

    try:
        assert await wait_until(said, 30)
        found = re.search(r"voice-gateway: serving on http://127\.0\.0\.1:(\d+) ", "".join(printed))
        assert found, printed
        port = int(found.group(1))
        assert port != 0
        assert any(f"serving on http://127.0.0.1:{port} " in r.getMessage() for r in caplog.records)
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz") as response:
            assert response.status == 200
        os.kill(os.getpid(), signal.SIGTERM)  # the gateway's own handler: drain, then return 0
        assert await asyncio.wait_for(serving, 30) == 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        if not serving.done():
            serving.cancel()


def test_serve_on_port_0_names_its_instance_by_the_port_it_serves(monkeypatch):
    """``serve --port 0`` named its instance from the configured port, ``<host>-0``: two such
    processes on one host minted call ids (and ``ek_`` keys) of one instance, so a proxy routing by
    it could not tell them apart. Now the port is bound before anything else and the instance is
    ``<host>-<bound port>``; the socket served is that one, and closed when ``serve`` returns."""
    for name in ("VG_PORT", "VG_INSTANCE_ID", "VG_HOST"):
        monkeypatch.delenv(name, raising=False)
    served: list[tuple] = []

    def serve(config, bound=None):
        served.append((config, bound, bound.getsockname()[1] if bound is not None else None))
        return 0

    monkeypatch.setattr(cli, "serve", serve)
    for _ in range(2):
        assert cli.main(["serve", "--host", "127.0.0.1", "--port", "0"]) == 0
    instances = []
    for config, bound, port in served:
        assert port and config.port == port, (config.port, port)
        assert config.instance.endswith(f"-{port}"), config.instance
        assert bound.fileno() == -1  # closed once serve returned
        instances.append(config.instance)
    assert instances[0] != instances[1]


def test_every_flag_shows_its_default_and_variable(capsys):
    """``serve --help`` (and ``prepare``, ``models``) named each flag's variable but no default
    (the parser's defaults are None, so that ``VG_*`` can fill them)."""

    def help_of(command: str) -> str:
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([command, "--help"])
        assert exited.value.code == 0
        return " ".join(capsys.readouterr().out.split())  # argparse wraps lines

    for command in ("serve", "prepare", "models"):
        text = help_of(command)
        assert "--port PORT TCP port for HTTP signaling [default 8080; env VG_PORT]" in text, command
        assert "[default qwen2.5-coder-1.5b; env VG_LLM_MODEL]" in text
        assert "[default off; env VG_ALLOW_NO_API_KEY]" in text  # a bool as the words it takes
        assert "[default ''; env VG_API_KEY]" in text  # an empty text, quoted
        assert "[default 'You are a helpful voice assistant" in text  # text with spaces, quoted


def test_loadtest_help_shows_defaults_as_serve_does_and_not_the_key(capsys, monkeypatch):
    """``loadtest --help`` hand-wrote each default, ``(default 3)``, where ``serve --help`` ends
    each flag's help with ``[default 8080; env VG_PORT]``: now one formatter writes both forms
    alike (a bool as on/off, text with spaces quoted), and ``--api-key`` still names the variable,
    never the key itself."""
    monkeypatch.setenv("VG_API_KEY", "sk-loadtest-secret")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["loadtest", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in (
        "questions per caller [default 3]",
        "[default webrtc]",
        "2,4,6,8 [default 6]",
        "skip the lone caller before the phases [default off]",
        "[default $VG_API_KEY]",
        "-m gateway serve']",
    ):
        assert shown in text, shown
    assert "(default" not in text and "sk-loadtest-secret" not in text
    from gateway.loadgen.flags import api_key

    args = build_parser().parse_args(["loadtest", "--speech", "x"])
    assert api_key(args) == "sk-loadtest-secret"  # still the variable's, read when the run starts
    assert api_key(build_parser().parse_args(["loadtest", "--speech", "x", "--api-key", ""])) == ""


def _taken_port() -> socket.socket:
    """A TCP socket listening on a loopback port (close it when done)."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken


def _cannot_listen(host: str, port: int) -> list[str]:
    return [f"--host={host}", "--port", str(port), "--allow-no-api-key", "1"]


def test_serve_that_cannot_listen_says_so_before_loading_any_model(monkeypatch, capsys):
    """``serve --host 256.1.1.1`` (or a port in use) loaded the models, 8-16 s, before it found it
    could not listen. Now the address is bound (and let go) first: one line, exit 1, no model loaded."""
    from gateway.models import loader

    def no_loading(config):
        raise AssertionError("models loaded before the address was checked")

    monkeypatch.setattr(loader, "load_models", no_loading)
    for name in [n for n in os.environ if n.startswith("VG_")]:
        monkeypatch.delenv(name)
    with _taken_port() as taken:
        port = taken.getsockname()[1]
        for args, why in (
            (_cannot_listen("256.1.1.1", 8080), "256.1.1.1"),
            (_cannot_listen("127.0.0.1", port), "in use"),
        ):
            assert cli.main(["serve", *args]) == 1
            said = capsys.readouterr().err.strip().splitlines()
            assert len(said) == 1 and said[0].startswith("voice-gateway: cannot listen on http://"), said
            assert why in said[0], said
        sip = ["serve", "--host", "127.0.0.1", "--port", "0", "--sip-port", str(port), "--sip-host", "127.0.0.1"]
        assert cli.main(sip) == 1
        said = capsys.readouterr().err.strip().splitlines()
        assert len(said) == 1 and said[0].startswith(f"voice-gateway: cannot listen on SIP TCP 127.0.0.1:{port}"), said


@pytest.mark.slow  # two processes start (~2 s each)
def test_voice_gateway_serve_that_cannot_listen_exits_1_within_seconds():
    env = {k: v for k, v in os.environ.items() if not k.startswith("VG_")}
    with _taken_port() as taken:
        port = taken.getsockname()[1]
        for args in (_cannot_listen("256.1.1.1", 8080), _cannot_listen("127.0.0.1", port)):
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "gateway", "serve", *args], capture_output=True, text=True, timeout=60, env=env
            )
            took = time.monotonic() - started
            assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
            said = done.stderr.strip().splitlines()
            assert len(said) == 1 and said[0].startswith("voice-gateway: cannot listen on http://"), said
            assert took < 6, took  # the models take 8-16 s to load
