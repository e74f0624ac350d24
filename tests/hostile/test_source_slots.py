"""A per-source session slot given back on every way a call fails or ends, and a source counted
once whatever form its address takes. The worst failure of ``max_sessions_per_source`` is a leak:
a slot never given back locks an honest caller out (429) after a couple of odd calls. Loopback is
made an ordinary source here (``unlimited_sources=""``; it stays the trusted proxy, so a client
is named by ``X-Forwarded-For`` as behind ``deploy/nginx.conf``)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from gateway.server.app_keys import SESSIONS
from gateway.transports.sources import forwarded_client, parse_networks, source_key
from tests.helpers import app_idle, serve, wait_until
from tests.hostile.sdp_offers import offers

CLIENT = "203.0.113.7"
KEY = "k" * 32
AS_CLIENT = {"X-Forwarded-For": CLIENT, "Authorization": f"Bearer {KEY}"}


async def _opens_its_two_sessions(http: aiohttp.ClientSession, url: str, app: web.Application) -> None:
    """The client opens 2 WebSocket sessions (the limit), the third is refused 429; then all end."""
    held = [await http.ws_connect(f"{url}/v1/realtime", headers=AS_CLIENT) for _ in range(2)]
    try:
        try:
            await http.ws_connect(f"{url}/v1/realtime", headers=AS_CLIENT)
            third = 101
        except aiohttp.WSServerHandshakeError as refused:
            third = refused.status
        assert third == 429
    finally:
        for ws in held:
            await ws.close()
    assert await wait_until(lambda: not app[SESSIONS].sessions and app_idle(app), 15)


async def test_a_websocket_dropped_during_its_upgrade_gives_its_slot_back_quietly(models, gateway_config):
    """Before: the slot came back, but each drop logged ``GET /v1/realtime failed`` at ERROR with a
    traceback (the 101 written to a closed socket): a log any client could flood."""
    config = gateway_config(pool_size=3, unlimited_sources="", api_key=KEY)
    async with serve(config, models) as (url, app):
        port = int(url.rsplit(":", 1)[1])
        upgrade = (
            "GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"X-Forwarded-For: {CLIENT}\r\nAuthorization: Bearer {KEY}\r\n\r\n"
        ).encode()
        for _ in range(4):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(upgrade)
            writer.transport.abort()  # gone before the 101 is written
        assert await wait_until(lambda: app_idle(app) and not app[SESSIONS].sessions, 5)
        async with aiohttp.ClientSession() as http:
            await _opens_its_two_sessions(http, url, app)
    # no_logged_exception (conftest): nothing logged with a traceback


async def test_refused_offers_keys_and_ended_sessions_give_their_slots_back(models, gateway_config):
    """Each way tried leaves the source its 2 sessions: offers refused (unparsable, no m-line), a
    wrong key, offers whose ICE never connects (``connect_timeout``), sessions ended by the idle
    watchdog. Held on main already (a guard: a leak here locks honest callers out)."""
    config = gateway_config(pool_size=3, unlimited_sources="", api_key=KEY, connect_timeout_s=1, idle_timeout_s=2)
    sdp = {**AS_CLIENT, "Content-Type": "application/sdp"}
    async with serve(config, models) as (url, app), aiohttp.ClientSession() as http:
        calls = f"{url}/v1/realtime/calls"
        for body in ("garbage", "v=0\r\n", "v=0\r\n"):
            async with http.post(calls, data=body, headers=sdp) as response:
                assert response.status == 400
        for _ in range(3):
            async with http.post(
                calls, data=offers()["chrome_like"], headers={**sdp, "Authorization": "Bearer no"}
            ) as r:
                assert r.status == 401
        for _ in range(2):  # no peer behind the offer's candidates: ICE never connects
            async with http.post(calls, data=offers()["chrome_like"], headers=sdp) as response:
                assert response.status == 201
        assert await wait_until(lambda: not app[SESSIONS].sessions, 10)
        idle = [await http.ws_connect(f"{url}/v1/realtime", headers=AS_CLIENT) for _ in range(2)]
        assert await wait_until(lambda: not app[SESSIONS].sessions, 10)  # idle_timeout
        for ws in idle:
            await ws.close()
        assert await wait_until(lambda: app_idle(app), 15)
        await _opens_its_two_sessions(http, url, app)


def test_a_port_written_by_the_proxy_is_no_source_of_its_own():
    """Some proxies append the client's port to ``X-Forwarded-For`` (``ip:port``, ``[ipv6]:port``).
    Before: ``203.0.113.7:51234`` was a source of its own (not an IP address), a new one with each
    connection's port, so such a proxy's clients had no session limit at all."""
    trusted = parse_networks("127.0.0.0/8, ::1", "trusted_proxies")

    def key(*forwarded_for: str) -> str:
        return source_key(forwarded_client("127.0.0.1", forwarded_for, trusted))

    assert key("203.0.113.7:51234") == key("203.0.113.7:51235") == key(CLIENT) == CLIENT
    assert key("[2001:db8::7]:443") == key("2001:db8::8") == "2001:db8::/64"
    assert key("[::ffff:203.0.113.7]:80") == CLIENT
    assert key("198.51.100.9, 203.0.113.7:51234, 127.0.0.1:8080") == CLIENT  # a trusted hop with a port: skipped
    assert key("garbage") == "garbage"  # no address: counted on its own, never exempt
