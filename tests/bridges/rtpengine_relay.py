"""Debian's rtpengine as the media relay of the test's Kamailio, in userspace (no kernel module, no
config file): its NG control protocol on 127.0.0.1 (a free UDP port), its media on another loopback
address, 127.0.0.2 by default, so that the gateway gets the call's RTP from another address than
the SIP signalling (Kamailio on 127.0.0.1), as from a media relay on its own host.

Needs the ``rtpengine-daemon`` package (``scripts/setup.sh --services``)."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from tests.ops.services import Service, ServiceRig, port_range, require, wait_for_log


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port nothing is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class RtpEngine(ServiceRig):
    """``async with RtpEngine(folder) as relay``: rtpengine running; ``relay.ng_port`` is its
    control port (Kamailio's ``rtpengine_sock``), ``relay.address`` where it relays media."""

    def __init__(self, folder: Path, address: str = "127.0.0.2") -> None:
        self.folder = folder
        self.address = address
        self.ng_port = free_udp_port()

    async def __aenter__(self) -> RtpEngine:
        binary = require("rtpengine", "rtpengine-daemon")
        self.folder.mkdir(parents=True, exist_ok=True)
        first, last = port_range(self.ng_port, 200)
        argv = [
            binary, "--config-file=none", "--table=-1", "--foreground", "--log-stderr", "--log-level=6",
            f"--interface={self.address}", f"--listen-ng=127.0.0.1:{self.ng_port}",
            f"--port-min={first}", f"--port-max={last}", f"--pidfile={self.folder / 'rtpengine.pid'}",
            "--num-threads=2", "--delete-delay=0",
        ]  # fmt: skip
        service = Service("rtpengine", argv, self.folder / "rtpengine.log")
        await self._start(service, wait_for_log(service, "Startup complete", 15))
        return self

    def relayed_packets(self) -> list[int]:
        """RTP packets (not RTCP) each direction of the deleted calls carried, from rtpengine's
        final statistics (``Port 127.0.0.2:37876 <> 127.0.0.1:39656, SSRC f7ae22ff, 468 p, ...``)."""
        return [int(count) for count in re.findall(r"Port +\S+ <> +\S+, SSRC \w+, (\d+) p,", self.log)]
