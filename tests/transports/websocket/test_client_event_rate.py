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


async def flood(client: EventClient, frame: str | bytes = CLEAR) -> int:
    """Send ``FLOOD`` frames at once (clears as text, or a binary frame); returns the index of
    the first event after them."""
    mark = len(client.events)
    assert client.ws is not None
    for _ in range(FLOOD):
        if isinstance(frame, bytes):
            await client.ws.send_bytes(frame)
        else:
            await client.ws.send_str(frame)
    return mark


def limited(client: EventClient, mark: int) -> list[dict]:
    return [e for e in client.events[mark:] if e["type"] == "error" and e["error"]["code"] == "rate_limit_exceeded"]


async def test_websocket_flood_is_dropped_with_one_error(models, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            mark = await flood(client)
            error = await client.wait_for("error", timeout=20, after=mark)
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
                error = await control.wait_for("error", timeout=20, after=mark)
                assert error["error"]["code"] == "rate_limit_exceeded", error
                await asyncio.sleep(1.0)
                assert len(limited(control, mark)) == 1
                cleared = [e for e in control.events[mark:] if e["type"] == "input_audio_buffer.cleared"]
                assert len(cleared) < FLOOD / 2, len(cleared)
                assert app[POOL].units[0].state is UnitState.ACTIVE
        finally:
            await caller.hangup()


def binary_refusals(client: EventClient, mark: int) -> list[dict]:
    return [e for e in client.events[mark:] if e["type"] == "error" and "Binary frames" in e["error"]["message"]]


async def test_binary_frame_flood_counts_in_the_rate(models, gateway_config):
    """A binary frame is no client event, but each used to get its own ``error``: 3000 frames made
    3000 server events. Now they count in the same rate as text events (one flood error)."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            mark = await flood(client, b"\x00" * 64)
            await client.wait_for("error", timeout=20, after=mark)
            await asyncio.sleep(1.0)
            assert len(limited(client, mark)) == 1
            assert 0 < len(binary_refusals(client, mark)) < FLOOD / 2
            assert app[POOL].units[0].state is UnitState.ACTIVE


async def test_sideband_binary_frame_flood_counts_in_the_rate(models, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        caller = RealtimeClient(url)
        assert await caller.connect() == 201
        try:
            async with EventClient(url, query=f"?call_id={caller.call_id}") as control:
                await asyncio.sleep(0.2)
                mark = await flood(control, b"\x00" * 64)
                await control.wait_for("error", timeout=20, after=mark)
                await asyncio.sleep(1.0)
                assert len(limited(control, mark)) == 1
                assert 0 < len(binary_refusals(control, mark)) < FLOOD / 2
                assert app[POOL].units[0].state is UnitState.ACTIVE
        finally:
            await caller.hangup()
