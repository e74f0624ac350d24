"""One Realtime session over a WebSocket (``GET /v1/realtime``): the leg of a
:class:`~gateway.transports.live_session.LiveSession` whose audio travels in the events.

Source: the OpenAI Realtime WebSocket transport. The protocol is the same as over WebRTC (one
Realtime session implementation, ``gateway.realtime``; ``EventAudioSession`` adds the audio events);
only audio I/O differs:

- caller audio: ``input_audio_buffer.append`` (base64, in ``audio.input.format``), metered by the
  session's audio budget, decoded to 16-bit PCM and resampled to the VAD's rate off the event loop,
  and submitted to the lease (:class:`~gateway.transports.websocket.input_audio.InputAudio`);
- reply audio: the unit's playout buffer read by a :class:`PlayoutPacer`, at most 400 ms ahead of the
  caller's playback, encoded to ``audio.output.format`` and sent as ``response.output_audio.delta``.
  A response's ``response.done`` waits until all its audio is sent (:meth:`when_audio_sent`).

The session ends once, through the door's hang-up: the client closes the socket or the connection
drops (``websocket_closed``), a watchdog fires (``idle_timeout``, ``max_duration``), or the gateway
stops (``server_shutdown``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
from aiohttp import WSCloseCode, web

from gateway.media.audio_format import AudioFormat, OutputAudioEncoder
from gateway.media.playout import SAMPLE_RATE
from gateway.pool.end_reason import EndReason
from gateway.realtime.audio_events import EventAudioSession
from gateway.realtime.session_update import SessionUpdate
from gateway.transports.door import Door
from gateway.transports.live_session import LiveSession
from gateway.transports.transport import TransportKind
from gateway.transports.websocket.event_socket import EventSocket
from gateway.transports.websocket.input_audio import InputAudio

log = logging.getLogger(__name__)

# The close code sent with each end reason (RFC 6455 7.4.1); others close with 1000.
_CLOSE_CODES = {EndReason.SERVER_SHUTDOWN: WSCloseCode.GOING_AWAY, EndReason.SERVER_ERROR: WSCloseCode.INTERNAL_ERROR}


def open_websocket_session(
    door: Door,
    update: Optional[SessionUpdate],
    *,
    beta: bool = False,
    extensions: frozenset[str] = frozenset(),
    source: Optional[str] = None,
) -> tuple[LiveSession, WebSocketTransport]:
    """Open a session through ``door`` on a new WebSocket leg (not connected yet: see
    :meth:`WebSocketTransport.serve`). Synchronous, so nothing runs between the claim and the
    upgrade that follows. ``source``: the client's address (:meth:`Door.open`). Raises what
    :meth:`Door.open` raises (Refused: draining, too many sessions from ``source``, no unit, no compute)."""
    legs: list[WebSocketTransport] = []

    def connect(session: LiveSession) -> WebSocketTransport:
        legs.append(WebSocketTransport(session))
        return legs[0]

    session = door.open(TransportKind.WEBSOCKET, update, connect, beta=beta, extensions=extensions, source=source)
    return session, legs[0]


class WebSocketTransport:
    """A caller's WebSocket: made by :func:`open_websocket_session`, then :meth:`serve` runs it on
    the prepared WebSocket until the session ends."""

    def __init__(self, session: LiveSession) -> None:
        self.session = session
        self.audio_input = InputAudio(session.lease, session.spawn)
        self.socket: Optional[EventSocket] = None
        self._encoder: Optional[OutputAudioEncoder] = None
        self.pacer = session.lease.new_audio_pacer(self._on_reply_audio)

    @property
    def realtime(self) -> EventAudioSession:
        realtime = self.session.realtime
        assert isinstance(realtime, EventAudioSession)
        return realtime

    def _on_reply_audio(self, generation: int, samples: np.ndarray) -> None:
        fmt = AudioFormat.from_session(self.realtime.settings.output_format)
        if self._encoder is None or self._encoder.format != fmt:
            self._encoder = OutputAudioEncoder(fmt, SAMPLE_RATE)
        self.realtime.send_output_audio(generation, self._encoder.encode(samples), samples.size * 1000 / SAMPLE_RATE)

    # ----- running -----
    async def serve(self, ws: web.WebSocketResponse) -> None:
        """Run the session on ``ws`` (prepared) until it ends: ``session.created`` first, then
        client events in (through the door's rate), server events and reply audio out."""
        session = self.session
        socket = self.socket = EventSocket(ws)
        try:
            session.realtime.start()
            session.spawn(self.pacer.run())
            session.spawn(session.watch())
            inbox = session.inbox(refuse_bytes=self._on_binary)
            await socket.receive(inbox, inbox)
        finally:
            await session.hangup(EndReason.WEBSOCKET_CLOSED)
        await session.ended.wait()

    def _on_binary(self, data: bytes) -> None:
        if self.session.end_reason is None:
            self.realtime.send_error(
                f"Binary frames are not supported ({len(data)} bytes received): send each "
                "client event as a JSON text frame, audio base64-encoded in "
                "input_audio_buffer.append.",
                code="invalid_event",
            )

    # ----- Transport -----
    def send_event(self, event: dict[str, Any]) -> None:
        """A server event for the client; dropped before :meth:`serve` (as events before the data
        channel opens are: the only such event is the ``session.updated`` of a config applied at
        the start, which ``session.created`` already shows) and after the socket closed."""
        if self.socket is not None:
            self.socket.send(event)

    def when_audio_sent(self, generation: int, then: Callable[[], None]) -> None:
        """``then()`` once the pacer has sent all the audio of ``generation``."""
        self.pacer.after_sent(generation, then)

    def stop_audio(self) -> None:
        self.pacer.stop()

    async def close(self, reason: EndReason, message: Optional[str]) -> None:
        """Close the socket with the reason's close code (RFC 6455 7.4.1)."""
        if self.socket is not None:
            await self.socket.close(_CLOSE_CODES.get(reason, WSCloseCode.OK), message or reason.value)
