"""Debian's Janus with the repository's ``deploy/janus`` configuration, and the bridge controller
``scripts/janus_bridge.py``, as real processes of the test. Janus's HTTP API, SIP stack and SIP-side
RTP are on 127.0.0.1 (free ports, a port range of its own); its WebRTC side has ICE host candidates
on this machine's other interfaces only (Janus leaves loopback out, as aiortc does).

Needs the ``janus`` package (``scripts/setup.sh --services``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from gateway.server.runner import free_port
from tests.ops.services import ROOT, Service, ServiceRig, port_range, require, wait_for_log
from tests.transports.sip.kamailio_proxy import KamailioProxy

DEPLOY = ROOT / "deploy" / "janus"
CONFIGS = ("janus.jcfg", "janus.plugin.sip.jcfg", "janus.transport.http.jcfg")


def _port_range(seed: int) -> str:
    """``first-last``: 200 ports of its own per run (Janus retries a port that is taken)."""
    return "{}-{}".format(*port_range(seed, 200))


class JanusServer(ServiceRig):
    """``async with JanusServer(folder) as janus``: Janus with the SIP plugin; ``janus.api`` is the
    URL of its Janus API (HTTP)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}/janus"

    def _write_config(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        texts = {name: (DEPLOY / name).read_text() for name in CONFIGS}
        replacements = {
            "janus.jcfg": [('rtp_port_range = "20000-29999"', f'rtp_port_range = "{_port_range(self.port)}"')],
            "janus.plugin.sip.jcfg": [
                ('rtp_port_range = "30000-39999"', f'rtp_port_range = "{_port_range(self.port + 7919)}"')
            ],
            "janus.transport.http.jcfg": [("port = 8088", f"port = {self.port}")],
        }
        for name, pairs in replacements.items():
            for old, new in pairs:
                assert old in texts[name], f"deploy/janus/{name} has no {old!r}"
                texts[name] = texts[name].replace(old, new)
        for name, text in texts.items():
            (self.folder / name).write_text(text)

    async def __aenter__(self) -> JanusServer:
        binary = require("janus", "janus")
        self._write_config()
        argv = [binary, "-F", str(self.folder), "-C", str(self.folder / "janus.jcfg"), "-o"]
        service = Service("janus", argv, self.folder / "janus.log")
        await self._start(service, self._answering(service, 30))
        return self

    async def _answering(self, service: Service, within_s: float) -> bool:
        """Whether ``GET /janus/info`` is answered within ``within_s`` seconds (AssertionError if
        Janus exits first)."""
        for _ in range(int(within_s / 0.2)):
            assert service.process.poll() is None, f"janus exited:\n{service.log[-3000:]}"
            try:
                if (await janus_info(self.api)).get("janus") == "server_info":
                    return True
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
        return False


class BridgeController(ServiceRig):
    """``async with BridgeController(folder, janus, gateway_url, user, registrar)``: the bridge
    controller (``scripts/janus_bridge.py``) as its own process, started and registered."""

    def __init__(self, folder: Path, janus: JanusServer, gateway_url: str, user: str, registrar: str) -> None:
        self.folder = folder
        self.argv = [
            sys.executable, str(ROOT / "scripts" / "janus_bridge.py"),
            "--janus", janus.api, "--gateway", gateway_url, "--user", user, "--registrar", registrar,
            "--lines", "2",
        ]  # fmt: skip

    async def __aenter__(self) -> BridgeController:
        self.folder.mkdir(parents=True, exist_ok=True)
        # Kamailio's registrar here asks for no password; Janus wants one all the same.
        env = {**os.environ, "JANUS_SIP_SECRET": "unused-by-this-registrar"}
        service = Service("janus_bridge", self.argv, self.folder / "janus_bridge.log", env=env)
        await self._start(service, wait_for_log(service, "registered sip:", 20))
        return self

    def gateway_calls(self) -> list[str]:
        """The gateway call ids the controller opened, in order."""
        return re.findall(r"is gateway call (\S+)", self.log)


@contextlib.asynccontextmanager
async def janus_bridge(
    folder: Path, gateway_url: str, user: str = "agent"
) -> AsyncIterator[tuple[str, BridgeController]]:
    """The whole bridge in front of the gateway at ``gateway_url``: Kamailio as the registrar,
    Janus, and the controller, which registers ``sip:<user>@127.0.0.1`` through Janus at Kamailio.
    Yields (the SIP URI a phone dials: that user at Kamailio, the controller)."""
    async with (
        KamailioProxy(folder / "kamailio", None, registrar=True) as registrar,
        JanusServer(folder / "janus") as janus,
        BridgeController(
            folder / "bridge", janus, gateway_url, f"sip:{user}@127.0.0.1", f"sip:127.0.0.1:{registrar.port}"
        ) as controller,
    ):
        yield f"sip:{user}@127.0.0.1:{registrar.port}", controller


async def janus_info(api: str) -> dict:
    """``GET /janus/info``: the server's description (version, plugins...)."""
    async with aiohttp.ClientSession() as http, http.get(f"{api}/info") as response:
        return await response.json(content_type=None)
