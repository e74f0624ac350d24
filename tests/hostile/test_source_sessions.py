"""One client holding every unit: a source opening sessions until the pool is full (each one kept
up to ``max_call_s`` by a response every few minutes). Before: every offer and WebSocket of one
address was admitted until ``pool_full``. Now a source holds at most ``max_sessions_per_source``
live sessions (2 by default), every transport together; more get 429 ``too_many_sessions`` with
``Retry-After``, counted in ``vg_calls_total{result}``. The deployment of ``deploy/nginx.conf``
is reproduced: requests come from loopback (a trusted proxy, and unlimited itself) naming the
client in ``X-Forwarded-For``, whose last hop is the one believed."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL, SESSIONS
from tests.helpers import app_idle, serve, wait_until
from tests.hostile.sdp_offers import offers

ATTACKER = "203.0.113.7"
NEIGHBOUR = "198.51.100.9"


async def test_one_source_holds_at_most_its_share_of_the_pool(models, gateway_config):
    offer = offers()["sip_bridge"]
    async with serve(gateway_config(pool_size=4, connect_timeout_s=30), models) as (url, app):
        async with aiohttp.ClientSession() as http:

            async def post(forwarded_for: str | None) -> aiohttp.ClientResponse:
                headers = {"Content-Type": "application/sdp"}
                if forwarded_for is not None:
                    headers["X-Forwarded-For"] = forwarded_for
                async with http.post(f"{url}/v1/realtime/calls", data=offer, headers=headers) as response:
                    await response.read()
                    return response

            first = [await post(ATTACKER) for _ in range(2)]
            assert [response.status for response in first] == [201, 201]
            refused = await post(ATTACKER)
            assert refused.status == 429 and int(refused.headers["Retry-After"]) > 0
            error = (await refused.json())["error"]
            assert error["code"] == "too_many_sessions" and error["type"] == "rate_limit_error"
            assert "max_sessions_per_source 2" in error["message"]
            # What the client wrote itself stays left of what the proxy appended: not believed.
            assert (await post(f"{NEIGHBOUR}, {ATTACKER}")).status == 429
            # The Realtime WebSocket is the same door: refused before the upgrade, no unit claimed.
            with pytest.raises(aiohttp.WSServerHandshakeError) as handshake:
                await http.ws_connect(f"{url}/v1/realtime", headers={"X-Forwarded-For": ATTACKER})
            assert handshake.value.status == 429
            # Another client behind the same proxy, and the box itself (loopback: unlimited), still call.
            assert (await post(NEIGHBOUR)).status == 201
            assert (await post(None)).status == 201
            assert len(app[SESSIONS].sessions) == 4
            # A session of the source ends: it may open one again.
            async with http.delete(f"{url}{first[0].headers['Location']}") as response:
                assert response.status == 200
            assert await wait_until(lambda: len(app[SESSIONS].sessions) == 3 and _one_idle(app), 15)
            assert (await post(ATTACKER)).status == 201
            async with http.get(f"{url}/metrics") as response:
                metrics = await response.text()
            assert 'vg_calls_total{result="too_many_sessions"} 3.0' in metrics
            for session_id in list(app[SESSIONS].sessions):
                await app[SESSIONS].hangup(session_id)
            assert await wait_until(lambda: app_idle(app), 15)


def _one_idle(app: web.Application) -> bool:
    return any(unit.state is UnitState.IDLE for unit in app[POOL].units)
