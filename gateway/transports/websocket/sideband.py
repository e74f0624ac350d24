"""Sideband control of a WebRTC call: a WebSocket attached to an existing call
(``GET /v1/realtime?call_id=rtc_...``), the OpenAI pattern for keeping tools and instructions on the
server while the browser (or a SIP bridge) holds the media.

Source: the OpenAI Realtime API "sideband" connection (``wss://.../v1/realtime?call_id=...``). The
socket receives every server event of the call, as the ``oai-events`` data channel does, and may
send client events, which act on the call's one Realtime session (audio stays on the WebRTC track:
``input_audio_buffer.append`` is refused there as on the data channel). The sideband closing does
not end the call; the call ending closes the sideband. The gateway's own events
(``GATEWAY_EVENTS``: ``gateway.latency``...) reach a sideband only when its URL asks for them
(``?gateway_events=``), as for any client, and the call makes them (its own client asked), so a
stock SDK attached to a call of the demo page sees only OpenAI's events.

Nothing is sent on attach (no ``session.created``: the call's session was created before, and went
to whoever was there then). OpenAI documents no first event for a sideband, and no stock client
waits for one: the Agents SDKs' call-id transports (openai-agents-python ``OpenAIRealtimeSIPModel``,
openai-agents-js ``OpenAIRealtimeSIP``) and the ``openai`` SDK's ``realtime.connect(call_id=...)``
send their ``session.update`` as the socket opens and read the session from the
``session.updated`` it gets (checked in their sources, 2026-08). A SIP call is attached to once
accepted (``gateway.server.websocket_routes``: a ringing one is refused, 409).
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import WSCloseCode, web

from gateway.realtime.events import GATEWAY_EVENTS, error_event
from gateway.transports.door import Door
from gateway.transports.live_session import LiveSession
from gateway.transports.transport import ServerEvent
from gateway.transports.websocket.event_socket import EventSocket


async def serve_sideband(
    door: Door, host: LiveSession, ws: web.WebSocketResponse, extensions: frozenset[str] = frozenset()
) -> None:
    """Attach the prepared ``ws`` to the live session ``host`` until either ends or the door
    closes (shutdown): server events of the call out (of the gateway's own, those in
    ``extensions``), client events in through the door's rate (a flood gets one
    ``rate_limit_exceeded``, as on the data channel; a binary frame gets an ``error``, on this
    socket only, and counts in that rate)."""
    socket = EventSocket(ws)
    stop = door.closing_signal()

    def relay(event: ServerEvent) -> None:
        if event.get("type") in GATEWAY_EVENTS and event.get("type") not in extensions:
            return
        socket.send(event)

    def on_binary(data: bytes) -> None:
        socket.send(
            error_event(
                f"Binary frames are not supported ({len(data)} bytes received): send each client "
                "event as a JSON text frame.",
                code="invalid_event",
            )
        )

    host.event_listeners.append(relay)
    inbox = host.inbox(refuse_bytes=on_binary)
    receiving = asyncio.ensure_future(socket.receive(inbox, inbox))
    ended = asyncio.ensure_future(host.ended.wait())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({receiving, ended, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        door.forget_signal(stop)
        with contextlib.suppress(ValueError):
            host.event_listeners.remove(relay)
        ended.cancel()
        stopped.cancel()
        if host.ended.is_set():
            await socket.close(WSCloseCode.OK, "call ended")
        else:
            await socket.close(WSCloseCode.GOING_AWAY if stop.is_set() else WSCloseCode.OK)
        receiving.cancel()
