"""One WebRTC call: an RTCPeerConnection, the leg of a :class:`~gateway.transports.live_session.LiveSession`,
from SDP offer to hang-up.

Sources: the OpenAI Realtime WebRTC contract (one audio track each way plus the ``oai-events``
data channel carrying the Realtime events as JSON text), JSEP (RFC 8829) for the answer made to
the offer, RFC 8866 (SDP) for the media directions of the answer.

The call is a :class:`~gateway.transports.transport.Transport`: events out on ``oai-events``, reply audio
out on the unit's output track (played in real time), caller audio from the track straight to the
lease. The door does the rest (rate limit, DTMF, watchdogs, the hang-up sequence); the call ends
the session when its peer connection closes or fails, its data channel closes, ICE/DTLS does not
connect within ``connect_timeout_s`` or the caller's media stops (``media_timeout_s``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Optional

from aiortc import RTCPeerConnection, RTCRtpTransceiver, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcdatachannel import RTCDataChannel
from aiortc.sdp import MediaDescription

from gateway.config import GatewayConfig
from gateway.media.dtmf import KeyPress
from gateway.media.inbound import InboundAudioReader
from gateway.media.media_watch import CallerMedia, transport_packets_received
from gateway.pool.end_reason import EndReason
from gateway.realtime.audio_events import AudioInput
from gateway.realtime.events import error_event
from gateway.realtime.session_update import SessionUpdate
from gateway.realtime.wire import encode_event, utf8_size
from gateway.transports.door import Door
from gateway.transports.live_session import LiveSession
from gateway.transports.transport import TransportKind
from gateway.transports.webrtc.answer import prefer_codec, shape_answer
from gateway.transports.webrtc.data_channel import accept_invalid_text
from gateway.transports.webrtc.dtmf import negotiate_telephone_events, receive_telephone_events
from gateway.transports.webrtc.ice import ice_configuration
from gateway.transports.webrtc.offer import CheckedOffer, OfferError, answer_failure, check_offer

log = logging.getLogger(__name__)

# The data channel label of the OpenAI Realtime WebRTC contract.
EVENTS_CHANNEL = "oai-events"
# Server events not yet sent on oai-events (the channel's ``bufferedAmount``), bytes, past which
# the call ends (``client_too_slow``): aiortc's send queue is unbounded, and a peer whose SCTP
# acknowledges nothing (a stack with a full receive window drops what it cannot take; aiortc sends
# regardless of the window) stalls it. A call's events are text (its audio is RTP): a few KB a
# turn; the largest, ``session.updated``, echoes the tools and instructions (~100 KB at the default
# limits). Dropping events past the bound instead, as before, kept the call and its unit for a
# client that then missed events (a ``response.done``) without being told.
MAX_UNSENT_EVENT_BYTES = 16 * 1024 * 1024
# The largest message a peer that declares no ``a=max-message-size`` takes (RFC 8841 6: 64 KiB);
# Chrome and aiortc declare 256 KiB, Firefox 1 GiB; 0 declares no limit.
UNDECLARED_MAX_MESSAGE_BYTES = 65536


async def open_call(
    door: Door,
    offer_sdp: str,
    update: Optional[SessionUpdate],
    *,
    extensions: frozenset[str] = frozenset(),
    source: Optional[str] = None,
) -> tuple[LiveSession, str]:
    """Check the SDP offer, open a session through ``door`` on a new call (``source``: the
    client's address, :meth:`Door.open`), answer the offer. Returns (session, SDP answer).

    Raises OfferError (no unit claimed for an unusable offer; a claimed one is released when aiortc
    refuses the offer), Refused (draining, too many sessions, no unit, no compute) and what else
    :meth:`Door.open` raises; any other exception of answering is re-raised after the call is hung
    up (the HTTP layer's 500, logged).
    """
    offer = check_offer(offer_sdp, door.config.max_offer_bytes)
    calls: list[WebRTCCall] = []

    def connect(session: LiveSession) -> WebRTCCall:
        calls.append(WebRTCCall(session, door.config))
        return calls[0]

    session = door.open(TransportKind.WEBRTC, update, connect, extensions=extensions, source=source)
    try:
        answer = await calls[0].answer(offer)
    except Exception as exc:
        refusal = answer_failure(exc)
        if refusal is None:  # not an offer aiortc refused: a fault here (500, logged with its traceback)
            await session.hangup(EndReason.SERVER_ERROR)
            raise
        await session.hangup(EndReason.INVALID_OFFER)
        log.info("offer not answered: %s: %s", type(exc).__name__, exc)
        raise OfferError(refusal) from exc
    return session, answer


class WebRTCCall:
    """A caller's peer connection, for the length of the call: ``session`` is its
    :class:`LiveSession` (``session.id`` is the call id, ``rtc_...``). ``pc``, ``channel``
    (``oai-events`` once opened), ``reader`` and ``media`` (the caller's audio and its clock)."""

    def __init__(self, session: LiveSession, config: GatewayConfig) -> None:
        self.session = session
        self.config = config
        self.pc = RTCPeerConnection(ice_configuration(config))
        self.channel: Optional[RTCDataChannel] = None
        self.reader: Optional[InboundAudioReader] = None
        self.media: Optional[CallerMedia] = None
        self._too_slow = False  # MAX_UNSENT_EVENT_BYTES passed: the call is ending, nothing more is sent
        self.max_message_bytes: Optional[int] = UNDECLARED_MAX_MESSAGE_BYTES  # the peer's; None: no limit
        self._connected = asyncio.Event()
        self._output_track: Optional[MediaStreamTrack] = None  # reads the unit's playout buffer

    @property
    def audio_input(self) -> Optional[AudioInput]:
        """None: caller audio comes on the media track, not in events."""
        return None

    # ----- set-up -----
    async def answer(self, offer: CheckedOffer) -> str:
        """Apply the SDP offer, attach the unit's tracks, return the SDP answer (ICE candidates
        included: aiortc gathers them before ``setLocalDescription`` returns).

        The first audio m-line is answered ``sendrecv`` with the unit's output track, with the
        offer's ``telephone-event`` payload types (DTMF, :mod:`gateway.transports.webrtc.dtmf`); video and
        further audio m-lines are answered ``inactive``. The answer follows the offer in BUNDLE,
        transport protocol and DTLS role (:func:`~gateway.transports.webrtc.answer.shape_answer`). Raises
        whatever aiortc raises for an offer it cannot answer (:func:`open_call` makes it OfferError).
        """
        pc = self.pc
        pc.on("track", self._on_track)
        pc.on("datachannel", self._on_datachannel)
        pc.on("connectionstatechange", self._on_connection_state)
        self.max_message_bytes = max_message_bytes(offer)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer.sdp, type="offer"))
        if pc.sctp is not None:
            accept_invalid_text(pc.sctp)  # one non-UTF-8 text message must not end the call
        self._answer_media(offer)
        answer = await pc.createAnswer()
        await pc.setLocalDescription(
            RTCSessionDescription(sdp=shape_answer(answer.sdp, offer.description), type="answer")
        )
        if not any(t.kind == "audio" and t.currentDirection in ("sendrecv", "sendonly") for t in pc.getTransceivers()):
            # No audio goes back to this caller (data-channel-only, or audio offered sendonly or
            # inactive); reply audio must still leave the playout buffer, or TTS blocks on it.
            self._output_track = self.session.lease.new_output_track()
            self.session.spawn(self._play_to_nowhere(self._output_track))
        self.session.spawn(self._watchdog())
        return pc.localDescription.sdp

    def _answer_media(self, offer: CheckedOffer) -> None:
        """Set each transceiver's direction (made in the order of the offer's audio and video
        m-lines): the first audio one ``sendrecv`` with our track, the others ``inactive``."""
        answered_audio = False
        rtp_media = [media for media in offer.description.media if media.kind in ("audio", "video")]
        for transceiver, offered in zip(self.pc.getTransceivers(), rtp_media, strict=False):
            if transceiver.kind == "audio" and not answered_audio:
                self._answer_audio(transceiver, offered)
                answered_audio = True
            else:
                # Video, or a second audio m-line: answered inactive. Accepted (aiortc's default,
                # recvonly) it would be received and decoded into a queue nobody reads.
                transceiver.direction = "inactive"

    def _answer_audio(self, transceiver: RTCRtpTransceiver, offered: MediaDescription) -> None:
        """Answer audio with our track (Opus when offered, else G.722, PCMU or PCMA), and receive
        the offer's DTMF key presses."""
        transceiver.direction = "sendrecv"
        prefer_codec(transceiver)
        self._output_track = self.session.lease.new_output_track()
        transceiver.sender.replaceTrack(self._output_track)
        events = negotiate_telephone_events(transceiver, offered)
        if events:
            receive_telephone_events(transceiver.receiver, events, self._on_key_press)

    def _on_track(self, track: MediaStreamTrack) -> None:
        """The caller's first audio track: read it into the lease, its presence watched."""
        if track.kind != "audio" or self.reader is not None:
            return
        pc, lease, session = self.pc, self.session.lease, self.session
        receiver = next((t.receiver for t in pc.getTransceivers() if t.receiver.track is track), None)
        media_timeout_s = self.config.media_timeout_s
        self.media = CallerMedia(
            rate=lease.input_rate,
            on_audio=lease.submit_audio,
            on_gone=lambda: session.hangup_soon(
                EndReason.MEDIA_TIMEOUT, f"nothing received from the caller for {media_timeout_s:g} s"
            ),
            media_timeout_s=media_timeout_s,
            packets_received=lambda: transport_packets_received(receiver),
        )
        self.reader = InboundAudioReader(
            track,
            rate=lease.input_rate,
            on_audio=self.media.audio,
            on_timeout=lambda: None,
            media_timeout_s=None,  # presence is judged by self.media, once connected
            receiver=receiver,
        )
        session.spawn(self.reader.run())

    def _on_datachannel(self, channel: RTCDataChannel) -> None:
        """``oai-events`` opened by the caller: client events in (through the door's rate), and
        ``session.created`` out."""
        if channel.label != EVENTS_CHANNEL or self.channel is not None:
            return
        self.channel = channel
        channel.on("message", self.session.inbox())
        channel.on("close", lambda: self.session.hangup_soon(EndReason.DATA_CHANNEL_CLOSED))
        self.session.realtime.start()

    async def _on_connection_state(self) -> None:
        state = self.pc.connectionState
        if state == "connected":
            self._connected.set()
        elif state in ("failed", "closed"):
            self.session.hangup_soon(EndReason.ICE_FAILED if state == "failed" else EndReason.PEER_CLOSED)

    def _on_key_press(self, press: KeyPress) -> None:
        self.session.key_press(press.digit)

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

    async def _watchdog(self) -> None:
        """The connect timeout (``connect_timeout_s``), then the media timeout (from the
        connection, not the offer) and the door's idle and maximum-duration watchdogs."""
        timeout_s = self.config.connect_timeout_s
        try:
            await asyncio.wait_for(self._connected.wait(), timeout_s)
        except TimeoutError:
            await self.session.hangup(EndReason.CONNECT_TIMEOUT, f"ICE/DTLS did not connect within {timeout_s:g} s")
            return
        if self.media is not None:
            self.session.spawn(self.media.run())
        await self.session.watch()

    # ----- Transport -----
    def send_event(self, event: dict[str, Any]) -> None:
        """Send a server event on ``oai-events`` as JSON text (:func:`~gateway.realtime.wire.encode_event`:
        UTF-8 as it is) if the channel is open (events before it opens, or after it closed, are
        dropped). A caller that let ``MAX_UNSENT_EVENT_BYTES`` pile up unsent is hung up on
        (``client_too_slow``), and nothing more is queued for it. An event larger than the peer
        takes in one message (``max_message_bytes``, in bytes of UTF-8) cannot be sent: the caller
        gets a small ``error`` instead (:func:`too_large_error`), and a WARNING says which event and why."""
        channel = self.channel
        if channel is None or channel.readyState != "open" or self._too_slow:
            return
        text = encode_event(event)
        size = utf8_size(text)  # what aiortc sends and checks against the peer's limit
        limit = self.max_message_bytes
        if limit is not None and size > limit:
            log.warning(
                "call %s: %s %s not sent: %d bytes, over the %d-byte max-message-size of the caller's SDP",
                self.session.id,
                event.get("type"),
                event.get("event_id"),
                size,
                limit,
            )
            event = too_large_error(event, size, limit)
            text = encode_event(event)
            size = utf8_size(text)
        unsent = channel.bufferedAmount
        if unsent + size > MAX_UNSENT_EVENT_BYTES:
            self._too_slow = True
            log.warning(
                "call %s: the caller reads no events (%d bytes unsent): ending the call", self.session.id, unsent
            )
            self.session.hangup_soon(
                EndReason.CLIENT_TOO_SLOW, f"over {MAX_UNSENT_EVENT_BYTES} bytes of server events left unread"
            )
            return
        try:
            channel.send(text)
        except ValueError as exc:  # aiortc's own size check, should it read the limit otherwise
            log.warning("call %s: %s %s not sent: %s", self.session.id, event.get("type"), event.get("event_id"), exc)
        except Exception:  # the transport went away mid-send: the call is ending
            log.debug("send on closed data channel dropped")

    def when_audio_sent(self, generation: int, then: Callable[[], None]) -> None:
        """The track plays reply audio out in real time, its playback events follow: at once."""
        then()

    def stop_audio(self) -> None:
        """Stop this call's output track: the release can end, and the unit serve the next
        caller, before ``pc.close()`` has stopped the sender."""
        if self._output_track is not None:
            self._output_track.stop()

    async def close(self, reason: EndReason, message: Optional[str]) -> None:
        """Close the peer connection (the close reason first given 50 ms to reach the client)."""
        if not reason.client_left and self.channel is not None and self.channel.readyState == "open":
            await asyncio.sleep(0.05)
        await self.pc.close()


def max_message_bytes(offer: CheckedOffer) -> Optional[int]:
    """The largest data channel message the offer's peer takes (``a=max-message-size`` of its
    ``m=application`` section, RFC 8841 6; undeclared: 64 KiB), None for no limit (0). aiortc reads
    the same attribute and refuses a larger message with a ValueError."""
    for media in offer.description.media:
        if media.kind == "application":
            caps = media.sctpCapabilities
            if caps is None:
                return UNDECLARED_MAX_MESSAGE_BYTES
            return caps.maxMessageSize or None
    return UNDECLARED_MAX_MESSAGE_BYTES


def too_large_error(event: dict[str, Any], size: int, limit: int) -> dict[str, Any]:
    """What the caller gets instead of a server ``event`` of ``size`` bytes, over the ``limit`` of
    its SDP: an ``error`` (``server_error``, code ``event_too_large``) naming the event's type and
    ``event_id``."""
    message = (
        f"The server event {event.get('type')} ({event.get('event_id')}) was not delivered: it is {size} bytes, "
        f"over the data channel's max-message-size of {limit} bytes (a=max-message-size of your SDP offer)."
    )
    return error_event(message, code="event_too_large", error_type="server_error")
