"""Debian's Kamailio as a SIP proxy in front of the gateway (a SIP trunk's shape), started by the
test with the repository's ``deploy/kamailio.cfg``: it listens on 127.0.0.1 only, Record-Routes
every dialog, relays new requests to the gateway and in-dialog ones by their Route (loose
routing); optionally it relays the media through rtpengine, or is also a registrar.

Needs the ``kamailio`` package (``scripts/setup.sh --services``)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Optional

import pytest

from gateway.server.runner import free_port
from tests.ops.services import tied_to_this_process

KAMAILIO = shutil.which("kamailio") or "/usr/sbin/kamailio"
MODULES = Path("/usr/lib/x86_64-linux-gnu/kamailio/modules")

CONFIG = Path(__file__).resolve().parents[3] / "deploy" / "kamailio.cfg"


class KamailioProxy:
    """``async with KamailioProxy(folder, gateway_port) as proxy``: ``proxy.port`` takes calls.

    ``rtpengine``: the NG control port of an rtpengine on 127.0.0.1 that relays each call's media
    (``WITH_RTPENGINE``); ``registrar``: REGISTERs are saved and calls to a registered user go to
    it (``WITH_REGISTRAR``), others to the gateway (``gateway_port``; None: a registrar only), over
    ``gateway_transport`` (``udp`` or ``tcp``)."""

    def __init__(
        self,
        folder: Path,
        gateway_port: Optional[int],
        *,
        rtpengine: Optional[int] = None,
        registrar: bool = False,
        gateway_transport: str = "udp",
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.defines = [f"SIP_PORT={self.port}"]
        if gateway_port is not None:
            self.defines.append(f'GATEWAY_URI="sip:127.0.0.1:{gateway_port};transport={gateway_transport}"')
        if rtpengine is not None:
            self.defines += ["WITH_RTPENGINE", f'RTPENGINE_SOCK="udp:127.0.0.1:{rtpengine}"']
        if registrar:
            self.defines.append("WITH_REGISTRAR")
        self._process: Optional[asyncio.subprocess.Process] = None

    async def __aenter__(self) -> KamailioProxy:
        if not Path(KAMAILIO).exists():
            pytest.fail("kamailio is not installed: scripts/setup.sh --services (Debian package kamailio)")
        self.folder.mkdir(parents=True, exist_ok=True)
        defines = [argument for define in self.defines for argument in ("-A", define)]
        log = open(self.folder / "kamailio.log", "wb")  # the process holds it
        self._process = await asyncio.create_subprocess_exec(
            *tied_to_this_process([KAMAILIO]),
            "-f", str(CONFIG), "-L", str(MODULES), *defines, "-DD", "-E", "-m", "32", "-M", "4",
            "-w", str(self.folder), "-P", str(self.folder / "kamailio.pid"), "-Y", str(self.folder),
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
        log.close()
        for _ in range(100):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return self
            except OSError:
                await asyncio.sleep(0.1)
        raise RuntimeError(f"kamailio did not start: {self.log()[-2000:]}")

    def log(self) -> str:
        return (self.folder / "kamailio.log").read_text(errors="replace")

    async def __aexit__(self, *exc: object) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()
