"""SIP over TCP limits on real loopback sockets (:mod:`gateway.transports.sip.transport`): the caps
on accepted connections (in all and per source address), the body timeout after a head, outgoing
connections forgotten once closed, the connect timeout, and a quiet close (no cancelled-callback
traceback)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from gateway.transports.sip import transport as sip_transport
from gateway.transports.sip.message import SipRequest, SipResponse
from gateway.transports.sip.transport import SipPeer, SipTransport
from tests.helpers import wait_until
from tests.transports.sip import sip_samples


async def _until(predicate: Callable[[], bool]) -> None:
    assert await wait_until(predicate, 5)


def _options_over_tcp(port: int, branch: str) -> bytes:
    return sip_samples.options(port, branch=branch).replace(b"SIP/2.0/UDP", b"SIP/2.0/TCP")


@pytest.fixture
async def transport():
    seen: list[SipRequest | SipResponse] = []

    def on_message(message: SipRequest | SipResponse, peer: SipPeer) -> None:
        seen.append(message)

    sip = SipTransport("127.0.0.1", 0, on_message)
    sip.seen = seen  # type: ignore[attr-defined]
    await sip.start()
    yield sip
    await sip.close()


async def test_connections_beyond_the_cap_are_closed_and_logged_once(
    transport: SipTransport, caplog: pytest.LogCaptureFixture
):
    transport.max_connections = 2
    held = [await asyncio.open_connection("127.0.0.1", transport.port) for _ in range(2)]
    await _until(lambda: transport.open_connections == 2)
    with caplog.at_level(logging.WARNING, logger="gateway.transports.sip.transport"):
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", transport.port)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the gateway
            writer.close()
    assert transport.refused_connections == 3 and transport.open_connections == 2
    assert sum("closing new ones" in record.getMessage() for record in caplog.records) == 1
    # one held connection still carries messages; once one closes, a new one is taken again
    held[0][1].write(_options_over_tcp(transport.port, "z9hG4bKheld"))
    await _until(lambda: len(transport.seen) == 1)  # type: ignore[attr-defined]
    held[1][1].close()
    await _until(lambda: transport.open_connections == 1)
    reader, writer = await asyncio.open_connection("127.0.0.1", transport.port)
    writer.write(_options_over_tcp(transport.port, "z9hG4bKnew"))
    await _until(lambda: len(transport.seen) == 2)  # type: ignore[attr-defined]
    for _, other in [held[0], (reader, writer)]:
        other.close()


async def test_a_head_without_its_body_is_closed_after_the_body_timeout(transport: SipTransport):
    transport.body_timeout_s = 0.2
    reader, writer = await asyncio.open_connection("127.0.0.1", transport.port)
    head = _options_over_tcp(transport.port, "z9hG4bKnobody").replace(b"Content-Length: 0", b"Content-Length: 100")
    writer.write(head)  # the head, and never the 100 bytes it announces
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, not held for TCP_IDLE_S
    await _until(lambda: transport.open_connections == 0)
    assert transport.malformed == 1 and transport.seen == []  # type: ignore[attr-defined]
    writer.close()


async def test_an_outgoing_connection_is_forgotten_once_closed(transport: SipTransport):
    accepted: list[asyncio.StreamWriter] = []

    async def hang_up_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        writer.close()

    remote = await asyncio.start_server(hang_up_at_once, "127.0.0.1", 0)
    address = ("127.0.0.1", remote.sockets[0].getsockname()[1])
    try:
        await transport.connect("TCP", address)
        await _until(lambda: transport.open_connections == 0)  # the remote closed: forgotten
        await transport.connect("TCP", address)  # a new connection, not the dead writer
        await _until(lambda: len(accepted) == 2)
        await _until(lambda: transport.open_connections == 0)
    finally:
        remote.close()
        await remote.wait_closed()


async def test_an_outgoing_connect_times_out(transport: SipTransport, monkeypatch: pytest.MonkeyPatch):
    async def never_connects_double(*args: Any, **kwargs: Any) -> Any:  # a SYN never answered
        await asyncio.Event().wait()

    monkeypatch.setattr(asyncio, "open_connection", never_connects_double)
    transport.connect_timeout_s = 0.1
    with pytest.raises(OSError, match="no connection"):
        await asyncio.wait_for(transport.connect("TCP", ("192.0.2.1", 5060)), 5)  # (before: hung)
    assert transport.open_connections == 0


async def test_close_ends_connections_quietly(caplog: pytest.LogCaptureFixture):
    sip = SipTransport("127.0.0.1", 0, lambda message, peer: None)
    await sip.start()
    remote = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", sip.port)
        writer.write(_options_over_tcp(sip.port, "z9hG4bKhalf").replace(b"Content-Length: 0", b"Content-Length: 9"))
        await sip.connect("TCP", ("127.0.0.1", remote.sockets[0].getsockname()[1]))
        await _until(lambda: sip.open_connections == 2)
        with caplog.at_level(logging.DEBUG):
            await sip.close()
            await asyncio.sleep(0.1)  # the loop's callbacks of the ended connections
        assert sip.open_connections == 0
        noisy = [r for r in caplog.records if r.exc_info or "CancelledError" in r.getMessage()]
        assert noisy == [], [r.getMessage() for r in noisy]
        writer.close()
    finally:
        remote.close()
        await remote.wait_closed()


async def test_a_connection_a_live_call_is_reached_on_is_not_closed_for_being_quiet(transport, monkeypatch):
    """A quiet connection is closed after ``TCP_IDLE_S``, but not one a live call's caller is
    reached on (the BYE of a TLS caller behind NAT can go nowhere else): pinned, it stays open."""
    monkeypatch.setattr(sip_transport, "TCP_IDLE_S", 0.3)
    quiet_reader, quiet = await asyncio.open_connection("127.0.0.1", transport.port)
    held_reader, held = await asyncio.open_connection("127.0.0.1", transport.port)
    address = held.get_extra_info("sockname")
    transport.pin("TCP", (address[0], address[1]))
    assert await asyncio.wait_for(quiet_reader.read(), 5) == b""  # closed for being quiet
    await asyncio.sleep(1.0)
    assert transport.connection("TCP", (address[0], address[1])) is not None, "the pinned one stays"
    transport.unpin("TCP", (address[0], address[1]))
    assert await asyncio.wait_for(held_reader.read(), 5) == b""  # quiet and unpinned: closed
    quiet.close()
    held.close()


async def test_one_host_cannot_hold_every_connection(transport: SipTransport):
    # One host opens as many idle connections as the global cap allows; the trunk's OPTIONS on
    # a new connection from another address is still answered.
    total = sip_transport.MAX_TCP_CONNECTIONS
    held = [await asyncio.open_connection("127.0.0.1", transport.port) for _ in range(total)]
    await _until(lambda: transport.open_connections + transport.refused_connections == total)
    _, writer = await asyncio.open_connection("127.0.0.1", transport.port, local_addr=("127.0.0.2", 0))
    writer.write(_options_over_tcp(transport.port, "z9hG4bKlegit1"))
    await _until(lambda: len(transport.seen) == 1)  # type: ignore[attr-defined]
    cap = transport.max_connections_per_source
    assert transport.open_connections == cap + 1 and transport.refused_connections == total - cap
    writer.close()
    for _, other in held:
        other.close()
