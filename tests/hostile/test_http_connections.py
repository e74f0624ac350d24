"""One address opening HTTP connections without end (each a file descriptor and a parser, kept
until the keep-alive timeout). Before: no per-address limit on the HTTP port (SIP over TCP had
32). Now one peer holds at most ``max_http_connections_per_source``; the next connection is
answered 429 ``too_many_connections`` (JSON, ``Retry-After``) and closed, counted in
``vg_http_connections_refused_total``; a trusted proxy's connections (loopback by default: the
nginx in front) are not counted. Loopback is made an ordinary client here (no trusted proxy, no
unlimited source)."""

from __future__ import annotations

import asyncio
import json

from gateway.server.app_keys import METRICS
from tests.helpers import serve

LIMIT = 4


async def _get(port: int, path: str = "/healthz") -> tuple[int, dict[str, str], bytes]:
    """One request on a new connection: (status, headers, body); the connection is closed after."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        raw = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


async def test_one_address_holds_at_most_its_connections(models, gateway_config):
    config = gateway_config(max_http_connections_per_source=LIMIT, trusted_proxies="", unlimited_sources="")
    async with serve(config, models) as (url, app):
        port = int(url.rsplit(":", 1)[1])
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMIT)]  # idle: never a request
        status, headers, body = await _get(port)
        assert status == 429 and int(headers["Retry-After"]) > 0
        error = json.loads(body)["error"]
        assert error["code"] == "too_many_connections" and "max_http_connections_per_source 4" in error["message"]
        assert app[METRICS].http_connections_refused._value.get() == 1
        # One of them closes: the address may connect again, and is served.
        held.pop()[1].close()
        statuses = []
        while len(statuses) < 50 and statuses[-1:] != [200]:
            await asyncio.sleep(0.05)  # until the gateway has seen the close
            statuses.append((await _get(port))[0])
        assert statuses[-1] == 200, statuses
        for _, writer in held:
            writer.close()


async def test_a_trusted_proxy_is_not_counted(models, gateway_config):
    async with serve(gateway_config(max_http_connections_per_source=LIMIT), models) as (url, app):
        port = int(url.rsplit(":", 1)[1])
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3 * LIMIT)]
        assert (await _get(port))[0] == 200  # loopback: the nginx in front carries every client
        for _, writer in held:
            writer.close()
        assert app[METRICS].http_connections_refused._value.get() == 0
