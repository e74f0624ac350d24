"""Slowloris on the HTTP port: request headers sent a line at a time, never finished. aiohttp's
``AppRunner`` keeps such a connection (and an idle keep-alive one) for its default keep-alive
timeout, 3630 s: a client held each of its connections (a file descriptor and a parser) for an
hour. ``http_keepalive_timeout_s`` closes a connection without a complete request in time; a
request being served and an upgraded WebSocket are not idle and are not cut."""

from __future__ import annotations

import asyncio
import time

from gateway.pool.unit import UnitState
from gateway.server.app import POOL
from tests.helpers import serve
from tests.transports.websocket.ws_client import EventClient


async def test_request_headers_trickled_are_cut_and_a_websocket_is_not(models, gateway_config):
    timeout_s = 1.0
    async with serve(gateway_config(http_keepalive_timeout_s=timeout_s), models) as (url, app):
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed_after = None
        while time.monotonic() - started < 10 * timeout_s:
            try:
                writer.write(b"X-Slow: 1\r\n")  # one more header line, never the blank line
                await writer.drain()
                if await asyncio.wait_for(reader.read(1), 0.2) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except ConnectionError:
                closed_after = time.monotonic() - started
                break
        writer.close()
        assert closed_after is not None and closed_after < 4 * timeout_s, closed_after
        # A WebSocket session outlives the timeout: it is a request being served, not an idle one.
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await asyncio.sleep(3 * timeout_s)
            mark = len(client.events)
            await client.send("session.update", session={"instructions": "Still here."})
            await client.wait_for("session.updated", after=mark, timeout=10)
            assert app[POOL].units[0].state is UnitState.ACTIVE
