"""A WebRTC caller whose SCTP stops acknowledging the gateway's data (what a stack does with data
sent past its full receive window, and aiortc sends regardless of the window): every server event
stays in aiortc's send queue, which has no bound. Small events can be answered with large ones
(``session.update``, ~60 bytes, gets the whole session back), and the gateway only dropped events
past 4 MiB unsent, silently: the call and its unit went on for a client that missed events. Past
``MAX_UNSENT_EVENT_BYTES`` the call now ends (``client_too_slow``) and the unit serves the next
caller, as the WebSocket's send queue does (``tests/hostile/test_websocket_unread.py``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gateway.client import RealtimeClient
from gateway.pool.end_reason import EndReason
from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL
from gateway.transports.webrtc.call import MAX_UNSENT_EVENT_BYTES
from tests.helpers import serve, wait_until


def acknowledge_nothing(client: RealtimeClient) -> None:
    """The caller's SCTP drops every DATA chunk it receives, unacknowledged (its own sending goes
    on: the gateway's acknowledgements still reach it)."""

    async def drop(chunk: Any) -> None:
        return None

    client.pc.sctp._receive_data_chunk = drop  # type: ignore[method-assign]


async def test_a_caller_that_acknowledges_nothing_is_hung_up_once_its_unsent_events_pass_the_bound(
    models, gateway_config
):
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": "Look the weather up. " * 1400, "parameters": {}}
        for i in range(4)
    ]  # ~118 KB (a client event may be 128 KiB), echoed in each session.updated
    async with serve(gateway_config(max_tools_bytes=256 << 10), models) as (url, app):
        unit = app[POOL].units[0]
        client = RealtimeClient(url)
        assert await client.connect() == 201
        await client.wait_for("session.created", timeout=20)
        acknowledge_nothing(client)
        client.send({"type": "session.update", "session": {"tools": tools}})
        small = json.dumps({"type": "session.update", "session": {"instructions": "Hi."}})
        echoes = 2 * MAX_UNSENT_EVENT_BYTES // len(json.dumps(tools))  # twice the bound
        for sent in range(echoes):
            if client.channel.readyState != "open":  # hung up on
                break
            client.send_raw(small)
            if sent % 40 == 39:
                await asyncio.sleep(0.5)  # 80 a second: within the client-event rate (100/s), none refused
        try:
            assert await wait_until(lambda: unit.state is UnitState.IDLE, 20), unit.state
            assert unit.close_reason == EndReason.CLIENT_TOO_SLOW
        finally:
            await client.close()
        # The unit serves the next caller.
        again = RealtimeClient(url)
        assert await again.connect() == 201
        await again.wait_for("session.created", timeout=20)
        assert unit.state is UnitState.ACTIVE
        await again.hangup()
