"""Debian's rtpengine as the media relay of the test's Kamailio, in userspace (no kernel module, no
config file): its NG control protocol on 127.0.0.1 (a free UDP port), its media on another loopback
address, 127.0.0.2 by default, so that the gateway gets the call's RTP from another address than
the SIP signalling (Kamailio on 127.0.0.1), as from a media relay on its own host. The test may
also drive it itself over the NG protocol (:meth:`RtpEngine.ng`), as a SIP proxy's module does,
with a plain RTP phone (:class:`RtpPhone`) on the other side.

Needs the ``rtpengine-daemon`` package (``scripts/setup.sh --services``)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import socket
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gateway.media.g711 import decode_mulaw, encode_mulaw
from gateway.transports.sip.rtp import RtpPacket, build_rtp, parse_rtp
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

    async def ng(self, command: dict[str, Any], within: float = 5.0) -> dict[str, Any]:
        """One NG command (rtpengine's control protocol: ``<cookie> <bencoded dictionary>`` over
        UDP, the reply with the same cookie); its reply, strings decoded. Raises AssertionError
        when rtpengine answers ``result`` other than ``ok``."""
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[bytes] = loop.create_future()
        cookie = secrets.token_hex(6).encode()

        class Client(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                if data.startswith(cookie + b" ") and not reply.done():
                    reply.set_result(data[len(cookie) + 1 :])

        transport, _ = await loop.create_datagram_endpoint(Client, remote_addr=("127.0.0.1", self.ng_port))
        try:
            transport.sendto(cookie + b" " + bencode(command))
            answer = bdecode(await asyncio.wait_for(reply, within))
        finally:
            transport.close()
        assert isinstance(answer, dict) and answer.get("result") == "ok", answer
        return answer

    def relayed_packets(self) -> list[int]:
        """RTP packets (not RTCP) each direction of the deleted calls carried, from rtpengine's
        final statistics (``Port 127.0.0.2:37876 <> 127.0.0.1:39656, SSRC f7ae22ff, 468 p, ...``)."""
        return [int(count) for count in re.findall(r"Port +\S+ <> +\S+, SSRC \w+, (\d+) p,", self.log)]


def bencode(value: Any) -> bytes:
    """``value`` (int, str, bytes, list, dict with str keys) bencoded (BitTorrent BEP 3, the NG
    protocol's encoding)."""
    if isinstance(value, int):
        return b"i%de" % value
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return b"%d:%s" % (len(value), value)
    if isinstance(value, list):
        return b"l" + b"".join(bencode(item) for item in value) + b"e"
    if isinstance(value, dict):
        return b"d" + b"".join(bencode(key) + bencode(value[key]) for key in sorted(value)) + b"e"
    raise TypeError(f"cannot bencode {type(value).__name__}")


def bdecode(data: bytes) -> Any:
    """The value of bencoded ``data``, byte strings decoded as UTF-8 text."""
    value, end = _bdecode(data, 0)
    assert end == len(data), f"trailing bytes after the bencoded value: {data[end:]!r}"
    return value


def _bdecode(data: bytes, at: int) -> tuple[Any, int]:
    kind = data[at : at + 1]
    if kind == b"i":
        end = data.index(b"e", at)
        return int(data[at + 1 : end]), end + 1
    if kind in (b"l", b"d"):
        items, at = [], at + 1
        while data[at : at + 1] != b"e":
            item, at = _bdecode(data, at)
            items.append(item)
        if kind == b"l":
            return items, at + 1
        return dict(zip(items[::2], items[1::2], strict=True)), at + 1
    colon = data.index(b":", at)
    start = colon + 1
    end = start + int(data[at:colon])
    return data[start:end].decode("utf-8", "replace"), end


class RtpPhone(asyncio.DatagramProtocol):
    """``async with RtpPhone(microphone) as phone``: a phone's media alone, on a UDP port of
    127.0.0.1: once told where to (:meth:`send_to`) it sends ``microphone`` (int16 mono 8 kHz) as
    PCMU RTP, 20 ms a packet in real time, and keeps what it receives (:meth:`heard`)."""

    def __init__(self, microphone: np.ndarray) -> None:
        self.microphone = microphone
        self.received: list[np.ndarray] = []
        self.port = 0
        self._transport: Optional[asyncio.DatagramTransport] = None
        self._sender: Optional[asyncio.Task[None]] = None

    async def __aenter__(self) -> RtpPhone:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=("127.0.0.1", 0))
        self._transport = transport
        self.port = int(transport.get_extra_info("sockname")[1])
        return self

    def offer(self) -> str:
        """The phone's SDP offer: PCMU and telephone-event over plain RTP, to its port."""
        return (
            "v=0\r\no=phone 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
            f"m=audio {self.port} RTP/AVP 0 101\r\na=rtpmap:0 PCMU/8000\r\n"
            "a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendrecv\r\n"
        )

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        packet = parse_rtp(data)
        if packet is not None and packet.payload_type == 0:
            self.received.append(decode_mulaw(packet.payload))

    def send_to(self, address: str, port: int) -> None:
        """Start sending the microphone to ``address:port`` (the answer's ``c=`` and ``m=``)."""
        self._sender = asyncio.ensure_future(self._send((address, port)))

    async def _send(self, to: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        start, ssrc = loop.time(), secrets.randbits(32)
        for index in range(self.microphone.size // 160):
            await asyncio.sleep(max(0.0, start + index * 0.02 - loop.time()))
            payload = encode_mulaw(self.microphone[index * 160 : (index + 1) * 160])
            assert self._transport is not None
            self._transport.sendto(build_rtp(RtpPacket(0, index == 0, index, index * 160, ssrc, payload)), to)

    def heard(self) -> np.ndarray:
        """What the phone received, int16 mono 8 kHz, packets in arrival order."""
        return np.concatenate(self.received) if self.received else np.zeros(0, np.int16)

    async def __aexit__(self, *exc: object) -> None:
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        if self._transport is not None:
            self._transport.close()
