"""A bare SIP peer for the tests: a UDP socket on loopback that sends raw messages and collects
what comes back, parsed."""

from __future__ import annotations

import asyncio
from typing import Optional

from gateway.transports.sip.message import SipRequest, SipResponse, parse_message


class _Collector(asyncio.DatagramProtocol):
    def __init__(self, queue: asyncio.Queue[bytes]) -> None:
        self.queue = queue

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.queue.put_nowait(data)


class SipSocket:
    """``async with SipSocket(gateway_port) as peer``: ``peer.port`` is its own UDP port, on
    ``host`` (another loopback address than the gateway's: another source)."""

    def __init__(self, gateway_port: int, host: str = "127.0.0.1") -> None:
        self.gateway = ("127.0.0.1", gateway_port)
        self.host = host
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.port = 0
        self._transport: Optional[asyncio.DatagramTransport] = None

    async def __aenter__(self) -> SipSocket:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _Collector(self.queue), local_addr=(self.host, 0))
        self._transport = transport
        self.port = transport.get_extra_info("sockname")[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            self._transport.close()

    def send(self, data: bytes) -> None:
        assert self._transport is not None
        self._transport.sendto(data, self.gateway)

    async def receive(self, within: float = 5.0) -> SipRequest | SipResponse:
        return parse_message(await asyncio.wait_for(self.queue.get(), within))

    async def response(self, status: Optional[int] = None, within: float = 5.0) -> SipResponse:
        """The next response (of ``status`` if given; others before it are skipped)."""
        while True:
            message = await self.receive(within)
            if isinstance(message, SipResponse) and (status is None or message.status == status):
                return message

    def drain(self) -> list[SipRequest | SipResponse]:
        """What arrived and was not read yet."""
        out = []
        while not self.queue.empty():
            out.append(parse_message(self.queue.get_nowait()))
        return out
