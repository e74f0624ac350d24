"""20 offers at once against a pool of 4: exactly 4 answered, 16 refused at once with 503
``pool_full`` and ``Retry-After``, none stuck; the pool serves the next storm the same way."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL, SESSIONS
from tests.helpers import serve, wait_until
from tests.hostile.sdp_offers import offers


async def test_twenty_concurrent_offers_against_a_pool_of_four(models, gateway_config):
    offer = offers()["sip_bridge"]
    async with serve(gateway_config(pool_size=4, connect_timeout_s=30), models) as (url, app):
        async with aiohttp.ClientSession() as http:

            async def post() -> tuple[int, str, dict]:
                async with http.post(
                    f"{url}/v1/realtime/calls",
                    data=offer,
                    headers={"Content-Type": "application/sdp"},
                    timeout=aiohttp.ClientTimeout(total=20),
                ) as response:
                    return response.status, await response.text(), dict(response.headers)

            for storm in range(2):
                results = await asyncio.gather(*(post() for _ in range(20)))
                statuses = sorted(status for status, _, _ in results)
                assert statuses == [201] * 4 + [503] * 16, (storm, statuses)
                for status, body, headers in results:
                    if status == 503:
                        assert json.loads(body)["error"]["code"] == "pool_full" and int(headers["Retry-After"]) > 0
                assert all(unit.state is UnitState.ACTIVE for unit in app[POOL].units)
                assert len(app[SESSIONS].sessions) == 4
                for status, _, headers in results:
                    if status == 201:
                        async with http.delete(f"{url}{headers['Location']}") as response:
                            assert response.status == 200
                assert await wait_until(lambda: all(u.state is UnitState.IDLE for u in app[POOL].units), 10)
        assert app[POOL].snapshot()["recoveries"] == 0 and not app[SESSIONS].sessions
