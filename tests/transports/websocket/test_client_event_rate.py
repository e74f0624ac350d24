"""One client-event rate for every transport: a flood (thousands of cheap events at once) over
the WebSocket transport or a sideband gets the same single ``rate_limit_exceeded`` error as over
the ``oai-events`` data channel (``tests/hostile/test_data_channel_input.py``), and the events
beyond the rate are dropped, not processed."""

from __future__ import annotations

import asyncio
import json

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL
from tests.helpers import serve
from tests.transports.websocket.ws_client import EventClient

FLOOD = 3000
CLEAR = json.dumps({"type": "input_audio_buffer.clear"})


async def flood(client: EventClient) -> int:
    """Send ``FLOOD`` clears at once; returns the index of the first event after them."""
    mark = len(client.events)
    assert client.ws is not None
    for _ in range(FLOOD):
        await client.ws.send_str(CLEAR)
    return mark


def limited(client: EventClient, mark: int) -> list[dict]:
    return [e for e in client.events[mark:] if e["type"] == "error" and e["error"]["code"] == "rate_limit_exceeded"]


async def test_websocket_flood_is_dropped_with_one_error(models, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", within=10)
            mark = await flood(client)
            error = await client.wait_for("error", within=20, after=mark)
            assert error["error"]["code"] == "rate_limit_exceeded", error
            assert error["error"]["type"] == "rate_limit_error"
            await asyncio.sleep(1.0)
            assert len(limited(client, mark)) == 1
            cleared = [e for e in client.events[mark:] if e["type"] == "input_audio_buffer.cleared"]
            assert len(cleared) < FLOOD / 2, len(cleared)  # the burst and the rate, not all of them
            assert app[POOL].units[0].state is UnitState.ACTIVE


async def test_sideband_flood_is_dropped_with_one_error(models, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        caller = RealtimeClient(url)
        assert await caller.connect() == 201
        try:
            async with EventClient(url, query=f"?call_id={caller.call_id}") as control:
                await asyncio.sleep(0.2)
                mark = await flood(control)
                error = await control.wait_for("error", within=20, after=mark)
                assert error["error"]["code"] == "rate_limit_exceeded", error
                await asyncio.sleep(1.0)
                assert len(limited(control, mark)) == 1
                cleared = [e for e in control.events[mark:] if e["type"] == "input_audio_buffer.cleared"]
                assert len(cleared) < FLOOD / 2, len(cleared)
                assert app[POOL].units[0].state is UnitState.ACTIVE
        finally:
            await caller.hangup()
