"""One call: an RTCPeerConnection bound to a claimed PipelineUnit, from SDP offer to hang-up.

Sources: the OpenAI Realtime WebRTC contract (one audio track each way plus the ``oai-events``
data channel carrying the Realtime events as JSON text), JSEP (RFC 8829) for the answer made to
the offer, RFC 8866 (SDP) for the media directions of the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Optional

from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcdatachannel import RTCDataChannel

from gateway.config import GatewayConfig
from gateway.media.dtmf import KeyPress
from gateway.media.inbound import InboundAudioReader
from gateway.pipeline.events import ResponseInterrupted
from gateway.pool.unit import PipelineUnit
from gateway.pool.watchdog import watch_session
from gateway.realtime.client_messages import RATE_LIMIT_CODE, RATE_LIMIT_TYPE, ClientEventRate, RateVerdict
from gateway.realtime.conversation import PromptSpec
from gateway.realtime.session import RealtimeSession
from gateway.signaling.answer import prefer_codec, shape_answer
from gateway.signaling.data_channel import accept_invalid_text
from gateway.signaling.dtmf import negotiate_telephone_events, receive_telephone_events
from gateway.signaling.end_reason import EndReason
from gateway.signaling.ice import ice_configuration
from gateway.signaling.media_watch import CallerMedia, transport_packets_received
from gateway.signaling.offer import CheckedOffer

log = logging.getLogger(__name__)

# The data channel label of the OpenAI Realtime WebRTC contract.
EVENTS_CHANNEL = "oai-events"
# Key presses a call remembers (``Call.key_presses``), newest last.
_KEY_PRESSES_KEPT = 64
# Server events not yet sent on oai-events beyond which more are dropped (a client that does not
# read its channel must not grow the gateway's memory: aiortc's send queue is unbounded), bytes.
MAX_UNSENT_EVENT_BYTES = 4 * 1024 * 1024


class Call:
    """A caller's peer connection and everything bound to it for the length of the call.

    Created by :meth:`CallRegistry.create` with the call id (``rtc_`` + 32 hex digits), the claimed
    unit and the call's Realtime session (``realtime``); ends once through :meth:`hangup` (client
    hang-up, peer connection closed or failed, data channel closed, a watchdog), which drains the
    unit and calls ``on_end(call)``.
    """

    def __init__(
        self,
        call_id: str,
        unit: PipelineUnit,
        config: GatewayConfig,
        realtime: RealtimeSession,
        on_end: Callable[[Call], None],
    ) -> None:
        self.id = call_id
        self.unit = unit
        self.config = config
        self.realtime = realtime
        self.pc = RTCPeerConnection(ice_configuration(config))
        self.channel: Optional[RTCDataChannel] = None
        self.reader: Optional[InboundAudioReader] = None
        self.media: Optional[CallerMedia] = None  # the caller's audio clock and presence
        self.key_presses: list[str] = []  # DTMF digits received (RFC 4733), newest last
        self._client_rate = ClientEventRate()  # client events on oai-events: floods are dropped
        self._send_overflowed = False
        self.started_at = time.monotonic()
        self.end_reason: Optional[EndReason] = None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._on_end = on_end
        self._connected = asyncio.Event()
        self._hangup_task: Optional[asyncio.Future[None]] = None
        self._output_track: Optional[MediaStreamTrack] = None  # reads the unit's playout buffer
        # Sideband connections (``GET /v1/realtime?call_id=``): each gets every server event sent on
        # ``oai-events``; ``ended`` is set once the call has ended (they close then).
        self.event_listeners: list[Callable[[dict[str, Any]], None]] = []
        self.ended = asyncio.Event()

    # ----- set-up -----
    async def answer(self, offer: CheckedOffer) -> str:
        """Apply the SDP offer, attach the unit's tracks, return the SDP answer (ICE candidates
        included: aiortc gathers them before ``setLocalDescription`` returns).

        The first audio m-line is answered ``sendrecv`` with the unit's output track, with the
        offer's ``telephone-event`` payload types (DTMF, :mod:`gateway.signaling.dtmf`); video and
        further audio m-lines are answered ``inactive``. The answer follows the offer in BUNDLE,
        transport protocol and DTLS role (:func:`~gateway.signaling.answer.shape_answer`). Raises
        whatever aiortc raises for an offer it cannot answer (the registry turns it into OfferError).
        """
        pc = self.pc

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "audio" and self.reader is None:
                receiver = next((t.receiver for t in pc.getTransceivers() if t.receiver.track is track), None)
                media_timeout_s = self.config.media_timeout_s
                self.media = CallerMedia(
                    rate=self.unit.models.vad.sample_rate,
                    on_audio=self.unit.submit_audio,
                    on_gone=lambda: self.hangup_soon(
                        EndReason.MEDIA_TIMEOUT, f"nothing received from the caller for {media_timeout_s:g} s"
                    ),
                    media_timeout_s=media_timeout_s,
                    packets_received=lambda: transport_packets_received(receiver),
                )
                self.reader = InboundAudioReader(
                    track,
                    rate=self.unit.models.vad.sample_rate,
                    on_audio=self.media.audio,
                    on_timeout=lambda: None,
                    media_timeout_s=None,  # presence is judged by self.media, once connected
                    receiver=receiver,
                )
                self._spawn(self.reader.run())

        @pc.on("datachannel")
        def on_datachannel(channel: RTCDataChannel) -> None:
            if channel.label != EVENTS_CHANNEL or self.channel is not None:
                return
            self.channel = channel

            @channel.on("message")
            def on_message(message: str | bytes) -> None:
                # Once the call is ending its unit may already serve the next caller: a late
                # message must not reach it (it would act on that caller's session state).
                if self.end_reason is not None:
                    return
                verdict = self._client_rate.admit()
                if verdict is RateVerdict.ACCEPT:
                    self.realtime.handle_client_message(message)
                elif verdict is RateVerdict.REFUSE_AND_TELL:
                    log.warning("call %s: client event flood, dropping events", self.id)
                    self.realtime.send_error(
                        self._client_rate.message(), code=RATE_LIMIT_CODE, error_type=RATE_LIMIT_TYPE
                    )

            @channel.on("close")
            def on_close() -> None:
                self.hangup_soon(EndReason.DATA_CHANNEL_CLOSED)

            self.realtime.start()

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            state = pc.connectionState
            if state == "connected":
                self._connected.set()
            elif state in ("failed", "closed"):
                self.hangup_soon(EndReason.ICE_FAILED if state == "failed" else EndReason.PEER_CLOSED)

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer.sdp, type="offer"))
        if pc.sctp is not None:
            accept_invalid_text(pc.sctp)  # one non-UTF-8 text message must not end the call
        answered_audio = False
        # Transceivers are made in the order of the offer's audio and video m-lines.
        rtp_media = [media for media in offer.description.media if media.kind in ("audio", "video")]
        for transceiver, offered in zip(pc.getTransceivers(), rtp_media, strict=False):
            if transceiver.kind == "audio" and not answered_audio:
                # Answer audio with our track: Opus when offered, else G.722, PCMU or PCMA.
                transceiver.direction = "sendrecv"
                prefer_codec(transceiver)
                self._output_track = self.unit.new_output_track()
                transceiver.sender.replaceTrack(self._output_track)
                answered_audio = True
                events = negotiate_telephone_events(transceiver, offered)
                if events:
                    receive_telephone_events(transceiver.receiver, events, self._on_key_press)
            else:
                # Video, or a second audio m-line: answered inactive. Accepted (aiortc's default,
                # recvonly) it would be received and decoded into a queue nobody reads.
                transceiver.direction = "inactive"
        answer = await pc.createAnswer()
        await pc.setLocalDescription(
            RTCSessionDescription(sdp=shape_answer(answer.sdp, offer.description), type="answer")
        )
        if not any(t.kind == "audio" and t.currentDirection in ("sendrecv", "sendonly") for t in pc.getTransceivers()):
            # No audio goes back to this caller (data-channel-only, or audio offered sendonly or
            # inactive); reply audio must still leave the playout buffer, or TTS blocks on it.
            self._output_track = self.unit.new_output_track()
            self._spawn(self._play_to_nowhere(self._output_track))
        self._spawn(self._watchdog())
        return pc.localDescription.sdp

    @staticmethod
    async def _play_to_nowhere(track: MediaStreamTrack) -> None:
        """Pull ``track`` (20 ms frames, paced on the wall clock) and drop the frames, as a sender
        would send them: responses play out in real time, so their ``output_audio_buffer`` events,
        ``response.done`` and the watchdogs work as on a call with audio. Ends when cancelled."""
        try:
            while True:
                await track.recv()
        except MediaStreamError:
            return
        finally:
            track.stop()

    def send_event(self, event: dict[str, Any]) -> None:
        """Send a server event on ``oai-events`` as JSON text if the channel is open (events
        before it opens, or after it closed, are dropped), and to each of ``event_listeners``."""
        for listener in list(self.event_listeners):
            listener(event)
        channel = self.channel
        if channel is None or channel.readyState != "open":
            return
        if channel.bufferedAmount > MAX_UNSENT_EVENT_BYTES:
            if not self._send_overflowed:  # the client does not read its channel: drop, say so once
                self._send_overflowed = True
                log.warning("call %s: over %d bytes of events unsent, dropping events", self.id, MAX_UNSENT_EVENT_BYTES)
            return
        self._send_overflowed = False
        try:
            channel.send(json.dumps(event))
        except Exception:  # the transport went away mid-send: the call is ending
            log.debug("send on closed data channel dropped")

    # ----- watchdogs -----
    async def _watchdog(self) -> None:
        """The connect timeout (``connect_timeout_s``), then the idle and maximum-duration
        timeouts both transports share (:func:`gateway.pool.watchdog.watch_session`)."""
        cfg = self.config
        try:
            await asyncio.wait_for(self._connected.wait(), cfg.connect_timeout_s)
        except TimeoutError:
            await self.hangup(EndReason.CONNECT_TIMEOUT, f"ICE/DTLS did not connect within {cfg.connect_timeout_s:g} s")
            return
        if self.media is not None:  # the media timeout counts from the connection, not the offer
            self._spawn(self.media.run())
        await watch_session(
            self.unit, cfg, started_at=self.started_at, ended=lambda: self.end_reason is not None, hangup=self.hangup
        )

    # ----- DTMF -----
    def _on_key_press(self, press: KeyPress) -> None:
        """A DTMF key press (RFC 4733): ``input_audio_buffer.dtmf_event_received`` (``event`` the
        digit, ``received_at`` Unix seconds, as OpenAI's SIP calls report it), kept in
        :attr:`key_presses` and logged; with ``dtmf_barge_in`` it interrupts the reply as speech
        does, with ``dtmf_to_llm`` it becomes a user text item that is answered."""
        if self.end_reason is not None:
            return
        self.key_presses = [*self.key_presses[-(_KEY_PRESSES_KEPT - 1) :], press.digit]
        log.info("call %s: key press %s", self.id, press.digit)
        self.realtime.send("input_audio_buffer.dtmf_event_received", event=press.digit, received_at=int(time.time()))
        self.unit.session_state.touch()
        if self.config.dtmf_barge_in:
            interruption = self.unit.interrupt()
            if interruption is not None:
                self.realtime.on_pipeline_event(ResponseInterrupted(self.id, interruption=interruption))
        if self.config.dtmf_to_llm:
            item = {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"I pressed {press.digit} on my keypad."}],
            }
            self.realtime.conversation.create(item, None)
            turn = self.realtime.settings.turn
            if turn.mode != "manual" and turn.create_response and self.realtime.responses.active() is None:
                self.realtime.responses.start(PromptSpec(), self.realtime.settings.audio)

    # ----- tear-down -----
    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task of this call (cancelled by :meth:`hangup`)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def hangup_soon(self, reason: EndReason, message: Optional[str] = None) -> None:
        """:meth:`hangup` from a synchronous callback (aiortc and media events): scheduled on the
        event loop, at most once."""
        if self.end_reason is None and self._hangup_task is None:
            self._hangup_task = asyncio.ensure_future(self.hangup(reason, message))  # held: not GC'd mid-run

    async def hangup(self, reason: EndReason | str, message: Optional[str] = None) -> None:
        """End the call once: tell the client why in an ``error`` event with code ``reason`` and
        ``message`` (unless it left itself, :attr:`EndReason.client_left`), drain the unit, close
        the peer connection. Raises ValueError for a ``reason`` that is no EndReason value."""
        if self.end_reason is not None:
            return
        reason = EndReason(reason)
        self.end_reason = reason
        if reason.client_left:
            self.realtime.close()  # nothing to tell it
        else:
            self.realtime.close(reason, message)
        if reason is not EndReason.CLIENT_HANGUP:
            log.info("call %s ended: %s", self.id, reason)
        if self._output_track is not None:
            # The drain can end, and the unit serve the next caller, before pc.close() below has
            # stopped the sender: this call's track must not read the next caller's reply audio.
            self._output_track.stop()
        self.unit.begin_drain(reason)
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        try:
            if not reason.client_left and self.channel is not None and self.channel.readyState == "open":
                await asyncio.sleep(0.05)  # let the close reason reach the client before the transport goes
            await self.pc.close()
        finally:
            self.ended.set()
            self._on_end(self)  # even if closing failed: the registry must not keep a dead call
