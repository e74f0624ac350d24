"""One Realtime session over a WebSocket (``GET /v1/realtime``): a claimed PipelineUnit driven by an
:class:`EventAudioSession`, with the audio in the events.

Source: the OpenAI Realtime WebSocket transport. The protocol is the same as over WebRTC (one
Realtime session implementation, ``gateway.realtime``); only audio I/O differs:

- caller audio: ``input_audio_buffer.append`` (base64, in ``audio.input.format``) decoded to 16-bit
  PCM, resampled to the VAD's rate and submitted to the unit (:class:`InputAudio`);
- reply audio: the unit's playout buffer read by a :class:`PlayoutPacer`, at most 400 ms ahead of the
  caller's playback, encoded to ``audio.output.format`` and sent as ``response.output_audio.delta``.
  A response's ``response.done`` waits until all its audio is sent.

The session ends once (:meth:`WebSocketSession.hangup`): the client closes the socket or the
connection drops (``websocket_closed``), a watchdog fires (``idle_timeout``, ``max_duration``), or the
gateway stops (``server_shutdown``). The unit then quarantine-drains, as after a call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Optional

import numpy as np
from aiohttp import WSCloseCode, web

from gateway.config import GatewayConfig
from gateway.media.audio_format import AudioFormat, InputAudioDecoder, OutputAudioEncoder
from gateway.media.playout import SAMPLE_RATE
from gateway.pipeline import events as pe
from gateway.pool.end_reason import EndReason
from gateway.pool.unit import PipelineUnit
from gateway.pool.watchdog import watch_session
from gateway.realtime.audio_events import EventAudioSession
from gateway.transports.event_socket import EventSocket

log = logging.getLogger(__name__)

# The close code sent with each end reason (RFC 6455 7.4.1); others close with 1000.
_CLOSE_CODES = {EndReason.SERVER_SHUTDOWN: WSCloseCode.GOING_AWAY, EndReason.SERVER_ERROR: WSCloseCode.INTERNAL_ERROR}


class InputAudio:
    """The caller audio of ``input_audio_buffer.append``: bytes in the session's input format ->
    int16 mono at the VAD's rate -> ``unit.submit_audio``. A new decoder is made when the input
    format changes (``session.update``). Implements ``gateway.realtime.audio_events.AudioInput``."""

    def __init__(self, unit: PipelineUnit) -> None:
        self._unit = unit
        self._decoder: Optional[InputAudioDecoder] = None

    def append(self, audio: bytes, input_format: dict) -> None:
        """Raises AudioFormatError (a ValueError) for bytes that are no audio of ``input_format``."""
        fmt = AudioFormat.from_session(input_format)
        if self._decoder is None or self._decoder.format != fmt:
            self._decoder = InputAudioDecoder(fmt, self._unit.models.vad.sample_rate)
        samples = self._decoder.decode(audio)
        if samples.size:
            self._unit.submit_audio(samples, time.monotonic())


class WebSocketSession:
    """A caller's WebSocket and everything bound to it for the length of the session.

    Created by :meth:`SessionRegistry.open` with the session id (``ws_<instance>_<32 hex digits>``),
    the claimed unit and ``make_realtime(session)``, which builds its :class:`EventAudioSession` on
    ``session.send_event`` and ``session.audio_input``; then :meth:`serve` runs it on the prepared
    WebSocket. ``on_end(session)`` is called once it has ended (``end_reason`` set).
    """

    def __init__(
        self,
        session_id: str,
        unit: PipelineUnit,
        config: GatewayConfig,
        make_realtime: Callable[[WebSocketSession], EventAudioSession],
        on_end: Callable[[WebSocketSession], None],
    ) -> None:
        self.id = session_id
        self.unit = unit
        self.config = config
        self.started_at = time.monotonic()
        self.end_reason: Optional[EndReason] = None
        self.audio_input = InputAudio(unit)
        self.socket: Optional[EventSocket] = None
        self._on_end = on_end
        self._tasks: set[asyncio.Future[Any]] = set()
        self._encoder: Optional[OutputAudioEncoder] = None
        self._ended = asyncio.Event()
        self.pacer = unit.new_audio_pacer(self._on_reply_audio)
        self.realtime = make_realtime(self)

    # ----- events -----
    def send_event(self, event: dict[str, Any]) -> None:
        """A server event for the client; dropped before :meth:`serve` (as events before the data
        channel opens are: the only such event is the ``session.updated`` of a config applied at
        the start, which ``session.created`` already shows) and after the socket closed."""
        if self.socket is not None:
            self.socket.send(event)

    def on_pipeline_event(self, event: pe.PipelineEvent) -> None:
        """A pipeline event of this session (the unit's sink): to the Realtime session; a spoken
        response's end waits until the pacer has sent all its audio."""
        if isinstance(event, pe.ResponseFinished) and event.audio:
            self.pacer.after_sent(event.generation, lambda: self.realtime.on_pipeline_event(event))
        else:
            self.realtime.on_pipeline_event(event)

    def _on_reply_audio(self, generation: int, samples: np.ndarray) -> None:
        fmt = AudioFormat.from_session(self.realtime.settings.output_format)
        if self._encoder is None or self._encoder.format != fmt:
            self._encoder = OutputAudioEncoder(fmt, SAMPLE_RATE)
        self.realtime.send_output_audio(generation, self._encoder.encode(samples), samples.size * 1000 / SAMPLE_RATE)

    # ----- running -----
    async def serve(self, ws: web.WebSocketResponse) -> None:
        """Run the session on ``ws`` (prepared) until it ends: ``session.created`` first, then
        client events in, server events and reply audio out."""
        socket = self.socket = EventSocket(ws)
        try:
            self.realtime.start()
            self._spawn(self.pacer.run())
            self._spawn(
                watch_session(
                    self.unit,
                    self.config,
                    started_at=self.started_at,
                    ended=lambda: self.end_reason is not None,
                    hangup=self.hangup,
                )
            )
            await socket.receive(self._on_text, self._on_binary)
        finally:
            await self.hangup(EndReason.WEBSOCKET_CLOSED)
        await self._ended.wait()

    def _on_text(self, text: str) -> None:
        if self.end_reason is None:  # once ending, the unit may already serve the next caller
            self.realtime.handle_client_message(text)

    def _on_binary(self, data: bytes) -> None:
        if self.end_reason is None:
            self.realtime.send_error(
                f"Binary frames are not supported ({len(data)} bytes received): send each "
                "client event as a JSON text frame, audio base64-encoded in "
                "input_audio_buffer.append.",
                code="invalid_event",
            )

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ----- tear-down -----
    async def hangup(self, reason: EndReason | str, message: Optional[str] = None) -> None:
        """End the session once (the same interface as a WebRTC call's, so that the watchdog and the
        graceful shutdown treat both alike): tell the client why in an ``error`` event with code ``reason``
        and ``message`` (unless it left itself), stop reading the unit's audio, drain the unit,
        close the socket. Raises ValueError for a ``reason`` that is no EndReason value."""
        if self.end_reason is not None:
            return
        reason = EndReason(reason)
        self.end_reason = reason
        if reason.client_left:
            self.realtime.close()
        else:
            self.realtime.close(reason, message)
            log.info("websocket session %s ended: %s", self.id, reason)
        self.pacer.stop()  # before the drain: the next caller's audio is not this session's
        self.unit.begin_drain(reason)
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        try:
            if self.socket is not None:
                await self.socket.close(_CLOSE_CODES.get(reason, WSCloseCode.OK), message or reason.value)
        finally:
            self._ended.set()
            self._on_end(self)
