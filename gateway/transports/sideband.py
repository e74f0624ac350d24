"""Sideband control of a WebRTC call: a WebSocket attached to an existing call
(``GET /v1/realtime?call_id=rtc_...``), the OpenAI pattern for keeping tools and instructions on the
server while the browser (or a SIP bridge) holds the media.

Source: the OpenAI Realtime API "sideband" connection (``wss://.../v1/realtime?call_id=...``). The
socket receives every server event of the call, as the ``oai-events`` data channel does, and may
send client events, which act on the call's one Realtime session (audio stays on the WebRTC track:
``input_audio_buffer.append`` is refused there as on the data channel). The sideband closing does
not end the call; the call ending closes the sideband.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import WSCloseCode, web

from gateway.realtime.events import error_event
from gateway.realtime.session import RealtimeSession
from gateway.transports.event_socket import EventSocket


class SidebandHost(Protocol):
    """What a sideband attaches to: a live WebRTC call (``gateway.signaling.call.Call``)."""

    @property
    def realtime(self) -> RealtimeSession:
        """The call's Realtime session (client events of the sideband go there)."""

    @property
    def event_listeners(self) -> list[Callable[[dict[str, Any]], None]]:
        """Each is called with every server event the call sends."""

    @property
    def ended(self) -> asyncio.Event:
        """Set once the call has ended."""


async def serve_sideband(host: SidebandHost, ws: web.WebSocketResponse, stop: asyncio.Event) -> None:
    """Attach the prepared ``ws`` to ``host`` until either ends or ``stop`` is set (shutdown):
    server events of the call out, client events in (a binary frame gets an ``error``, on this
    socket only)."""
    socket = EventSocket(ws)

    def on_text(text: str) -> None:
        if not host.ended.is_set():
            host.realtime.handle_client_message(text)

    def on_binary(data: bytes) -> None:
        socket.send(
            error_event(
                f"Binary frames are not supported ({len(data)} bytes received): send each client "
                "event as a JSON text frame.",
                code="invalid_event",
            )
        )

    host.event_listeners.append(socket.send)
    receiving = asyncio.ensure_future(socket.receive(on_text, on_binary))
    ended = asyncio.ensure_future(host.ended.wait())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({receiving, ended, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        with contextlib.suppress(ValueError):
            host.event_listeners.remove(socket.send)
        ended.cancel()
        stopped.cancel()
        if host.ended.is_set():
            await socket.close(WSCloseCode.OK, "call ended")
        else:
            await socket.close(WSCloseCode.GOING_AWAY if stop.is_set() else WSCloseCode.OK)
        receiving.cancel()
