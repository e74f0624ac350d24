"""The drain of ``app[SHUTDOWN]`` in process: once it begins no call is admitted (offers 503
``server_shutdown`` + Retry-After, ``/healthz`` draining), a call still answering when the grace
period ends is cut with the ``server_shutdown`` error, and every unit is idle after."""

from __future__ import annotations

import aiohttp

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app import POOL, SHUTDOWN
from tests.helpers import serve

LONG = "You are a storyteller. Always answer with at least six full sentences."


async def test_draining_refuses_every_way_in_and_cuts_calls_at_the_end_of_the_grace(models, gateway_config):
    config = gateway_config(pool_size=2, shutdown_grace_s=0.5, instructions=LONG, max_response_tokens=120)
    async with serve(config, models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        mark = client.ask("Tell me a long story about a lighthouse keeper.")
        await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)

        shutdown = app[SHUTDOWN]
        assert shutdown.begin() and not shutdown.begin()  # the flag is set once, synchronously
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/healthz") as response:
                assert response.status == 503 and (await response.json()) == {"status": "draining"}
            for path, body, content_type in (
                ("/v1/realtime/calls", "v=0\r\n", "application/sdp"),
                ("/offer", '{"sdp": "v=0", "type": "offer"}', "application/json"),
            ):
                async with http.post(url + path, data=body, headers={"Content-Type": content_type}) as response:
                    assert response.status == 503, path
                    assert (await response.json())["error"]["code"] == "server_shutdown"
                    assert response.headers["Retry-After"] == str(config.retry_after_s)
            async with http.get(f"{url}/v1/pool") as response:
                assert (await response.json())["draining"] is True

        report = await shutdown.drain(app[POOL].units)
        assert (report.finished, report.cut, report.units_not_idle) == (0, 1, []), report
        error = await client.wait_for("error", timeout=5, after=mark)
        assert error["error"]["code"] == "server_shutdown" and "grace" in error["error"]["message"]
        assert all(unit.state is UnitState.IDLE for unit in app[POOL].units)
        await client.close()


async def test_a_quiet_call_is_ended_at_once(models, gateway_config):
    async with serve(gateway_config(pool_size=1, shutdown_grace_s=30), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        report = await app[SHUTDOWN].drain(app[POOL].units)
        assert (report.finished, report.cut) == (1, 0) and report.seconds < 3, report
        error = await client.wait_for("error", timeout=5)
        assert error["error"]["code"] == "server_shutdown"
        await client.close()
