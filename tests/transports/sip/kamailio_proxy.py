"""Debian's Kamailio as a SIP proxy in front of the gateway (a SIP trunk's shape), started by the
test with a minimal config it writes: it listens on 127.0.0.1 only, Record-Routes every dialog,
relays new requests to the gateway and in-dialog ones by their Route (loose routing).

Needs the ``kamailio`` package (``scripts/setup.sh --services``)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Optional

import pytest

from gateway.server.runner import free_port

KAMAILIO = shutil.which("kamailio") or "/usr/sbin/kamailio"
MODULES = Path("/usr/lib/x86_64-linux-gnu/kamailio/modules")

_CONFIG = """#!KAMAILIO
debug=2
log_stderror=yes
children=1
tcp_children=1
auto_aliases=no
listen=udp:127.0.0.1:{port}
listen=tcp:127.0.0.1:{port}
mpath="{modules}/"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "siputils.so"
loadmodule "textops.so"
request_route {{
    if (!mf_process_maxfwd_header("10")) {{ sl_send_reply("483", "Too Many Hops"); exit; }}
    if (has_totag()) {{
        if (loose_route()) {{ t_relay(); exit; }}
        if (is_method("ACK")) {{ if (t_check_trans()) {{ t_relay(); }} exit; }}
        sl_send_reply("404", "Not here"); exit;
    }}
    if (is_method("CANCEL")) {{ if (t_check_trans()) {{ t_relay(); }} exit; }}
    record_route();
    $du = "sip:127.0.0.1:{gateway_port}";
    t_relay();
}}
"""


class KamailioProxy:
    """``async with KamailioProxy(folder, gateway_port) as proxy``: ``proxy.port`` takes calls."""

    def __init__(self, folder: Path, gateway_port: int) -> None:
        self.folder = folder
        self.gateway_port = gateway_port
        self.port = free_port()
        self._process: Optional[asyncio.subprocess.Process] = None

    async def __aenter__(self) -> KamailioProxy:
        if not Path(KAMAILIO).exists():
            pytest.fail("kamailio is not installed: scripts/setup.sh --services (Debian package kamailio)")
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "kamailio.cfg"
        config.write_text(_CONFIG.format(port=self.port, modules=MODULES, gateway_port=self.gateway_port))
        log = open(self.folder / "kamailio.log", "wb")  # the process holds it
        self._process = await asyncio.create_subprocess_exec(
            KAMAILIO,
            "-f", str(config), "-DD", "-E", "-m", "32", "-M", "4",
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
