"""A WebSocket client that sends and never reads. Small events can be answered with large ones
(``session.update``, ~40 bytes, gets the whole session back: 1 MB with 32 tools of 32 KB), and
the send queue was bounded only by its count (2000 events): a client reading nothing made the
gateway hold 4 MB per event (+1.6 GB in 8 s with 128 tools). The queue is bounded by bytes too
(``MAX_QUEUED_BYTES``): past it the client is disconnected (1008) and its session ends."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct

from gateway.pool.unit import UnitState
from gateway.server.app import POOL
from gateway.transports.websocket import event_socket
from tests.helpers import serve, wait_until


def client_frame(text: str) -> bytes:
    """One masked text frame (RFC 6455 5.2), as a client sends it."""
    payload = text.encode()
    size = len(payload)
    if size < 126:
        length = bytes([0x80 | size])
    elif size < 65536:
        length = bytes([0x80 | 126]) + struct.pack(">H", size)
    else:
        length = bytes([0x80 | 127]) + struct.pack(">Q", size)
    mask = os.urandom(4)
    whole = (mask * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(whole, "big")).to_bytes(size, "big")
    return bytes([0x81]) + length + mask + masked


async def test_a_client_that_reads_nothing_is_cut_once_its_unread_events_pass_the_byte_bound(models, gateway_config):
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": "Look the weather up. " * 1500, "parameters": {}}
        for i in range(32)
    ]  # ~1 MB, echoed in each session.updated (max_tools_bytes raised from its 64 KiB default to allow it)
    async with serve(gateway_config(max_tools_bytes=2 << 20), models) as (url, app):
        port = int(url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # reads nothing: let the server's queue fill
        sock.connect(("127.0.0.1", port))
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(
                sock,
                b"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            )
            assert (await loop.sock_recv(sock, 12)).startswith(b"HTTP/1.1 101")
            unit = app[POOL].units[0]
            await loop.sock_sendall(
                sock, client_frame(json.dumps({"type": "session.update", "session": {"tools": tools}}))
            )
            small = client_frame(json.dumps({"type": "session.update", "session": {"instructions": "Hi."}}))
            echoes = (
                2 * event_socket.MAX_QUEUED_BYTES // len(json.dumps(tools))
            )  # twice the bound, far below 2000 events
            for _ in range(echoes):
                await loop.sock_sendall(sock, small)
            assert echoes < event_socket.MAX_QUEUED_EVENTS
            assert await wait_until(lambda: unit.state is UnitState.IDLE, 30), unit.state
            assert unit.close_reason == "websocket_closed"
        finally:
            sock.close()
