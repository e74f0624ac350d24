"""One SIP call: the dialog the caller's INVITE made (RFC 3261 section 12, the UAS side) and its
RTP, the leg of a :class:`~gateway.transports.live_session.LiveSession` (a door ``Transport``).

Life of a call: ``ringing`` (100 Trying and 180 Ringing sent, the backend told) -> ``answered``
(:meth:`SipCall.accept`: 200 OK with the SDP answer, retransmitted until the ACK; the Realtime
session starts; RTP flows once the caller's RTP latches or its ACK comes, see
``gateway.transports.sip.rtp``) -> ``ended``. Whatever ends it (BYE or CANCEL from the caller,
reject, hang-up, refer, media timeout, watchdogs, shutdown) goes through the door's one hang-up
sequence, which calls :meth:`SipCall.close` last: the SIP side of the end (a final response while
ringing, BYE once answered). The session's events reach the backend on sideband WebSockets
(``session.event_listeners``); the leg itself carries none.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.media.dtmf import KeyPress
from gateway.media.media_watch import CallerMedia
from gateway.media.outbound import OutputAudioTrack
from gateway.media.playout import SAMPLE_RATE
from gateway.pool.end_reason import EndReason
from gateway.realtime.audio_events import AudioInput
from gateway.realtime.session_update import SessionUpdate
from gateway.transports.live_session import LiveSession
from gateway.transports.sip.dialog import Dialog
from gateway.transports.sip.message import SipRequest, SipResponse, is_digits, make_response
from gateway.transports.sip.rtp import RtpStream
from gateway.transports.sip.sdp import (
    AudioOffer,
    SdpError,
    added_stream,
    build_answer,
    media_lines,
    new_origin,
    parse_offer,
    removed_stream,
)
from gateway.transports.sip.srtp import SdesKeys
from gateway.transports.sip.transactions import RetransmitBudget, ServerTransaction

log = logging.getLogger(__name__)

# The final response a ringing call gets for the reason it ends (others: 480).
_RINGING_END = {EndReason.CALLER_CANCEL: 487, EndReason.CALLER_BYE: 487, EndReason.SERVER_SHUTDOWN: 503}


def _unspecified_address(offer: AudioOffer) -> bool:
    """True for an offer whose address is unspecified (``c=0.0.0.0``, RFC 2543's hold): no media there."""
    return ipaddress.ip_address(offer.address).is_unspecified


class CallStateError(RuntimeError):
    """The call is not in a state for this (accepted twice, referred before answering...)."""


class SipCall:
    """A caller's SIP dialog and its RTP, for the length of the call; ``session`` is its
    :class:`LiveSession` (``session.id`` is the call id, ``sip_...``).

    ``send_request(request, budget)`` sends an in-dialog request and resolves with its final
    response (the user agent's client transactions; ``budget`` bounds its UDP retransmissions:
    :attr:`request_budget`: the INVITE's, shared with the retransmissions of its responses);
    ``on_closed(call)`` runs once the call has ended. ``bye`` is the BYE the gateway sent on its
    side's hang-up, while it waits for its final response (Timer F at most).
    """

    def __init__(
        self,
        session: LiveSession,
        invite: SipRequest,
        transaction: ServerTransaction,
        offer: AudioOffer,
        dialog: Dialog,
        *,
        config: GatewayConfig,
        rtp: RtpStream,
        send_request: Callable[[SipRequest, RetransmitBudget], Awaitable[SipResponse]],
        on_closed: Callable[[SipCall], None],
        srtp_policy: str = "optional",
        latch_trust: Callable[[str], Optional[tuple[str, ...]]] = lambda address: (),
    ) -> None:
        self.session = session
        self.id = session.id
        self.invite = invite
        self.transaction = transaction
        self.offer = offer
        self.dialog = dialog
        self.config = config
        self.rtp = rtp
        self.state = "ringing"
        self.acknowledged = asyncio.Event()  # the ACK of the INVITE's 2xx came
        # the CSeq number of each re-INVITE whose 2xx awaits its ACK (RFC 3261 13.3.1.4)
        self._reinvites: dict[int, asyncio.Event] = {}
        self._media: Optional[CallerMedia] = None
        self.answer_sdp = ""
        self.rtp_port: Optional[int] = None  # the local RTP port, once open
        self.srtp_policy = srtp_policy  # the INVITE's (gateway.transports.sip.sdp.srtp_policy)
        self._latch_trust = latch_trust  # the IPs RTP may latch from, for an SDP address (trust.latch_sources)
        self._answered_at: tuple[str, int] = ("", 0)  # our RTP address and port in the answer
        self._origin = new_origin()  # the answer's o= session id and version
        self._send_request = send_request
        # a forged INVITE names whom its dialog's requests go to: they share its responses' budget
        self.request_budget = transaction.budget
        self.bye: Optional[asyncio.Future[None]] = None
        self._on_closed = on_closed
        self._track: Optional[OutputAudioTrack] = None
        rtp.on_key = self.on_key

    @property
    def end_reason(self) -> Optional[EndReason]:
        """Why the call ended (None while live)."""
        return self.session.end_reason

    # ----- Transport -----
    @property
    def audio_input(self) -> Optional[AudioInput]:
        """None: caller audio comes on RTP, not in events."""
        return None

    def send_event(self, event: dict[str, Any]) -> None:
        """A SIP leg carries no events: the session's sideband listeners get them all."""

    def when_audio_sent(self, generation: int, then: Callable[[], None]) -> None:
        """RTP plays reply audio out in real time, its playback events follow: at once."""
        then()

    def stop_audio(self) -> None:
        """Stop reading the unit's playout buffer (before the unit is released)."""
        if self._track is not None:
            self._track.stop()

    async def close(self, reason: EndReason, message: Optional[str]) -> None:
        """The SIP side of the end (the door's hang-up sequence calls it last): a ringing call gets
        a final response (487 for a CANCEL, 503 at shutdown, 480 otherwise; a reject has sent its
        own), an answered one a BYE unless the caller sent one; RTP stops."""
        was = self.state
        self.state = "ended"
        if was == "ringing" and not self.transaction.final:
            self.respond(_RINGING_END.get(reason, 480))
        self.rtp.close()
        if was == "answered" and reason is not EndReason.CALLER_BYE:
            # The BYE's client transaction outlives the call (Timer F at most); the user agent holds
            # it, and a graceful shutdown waits for it.
            self.bye = asyncio.ensure_future(self._bye())
        self._on_closed(self)

    async def _bye(self) -> None:
        try:
            response = await self._send_request(self.dialog.request("BYE"), self.request_budget)
            log.debug("call %s: BYE answered %d", self.id, response.status)
        except (TimeoutError, OSError, ValueError) as exc:  # ValueError: SipParseError, an unroutable hop
            log.info("call %s: BYE not answered: %s", self.id, exc or type(exc).__name__)

    # ----- answering -----
    def respond(self, status: int, reason: str = "", body: str = "") -> None:
        """A response to the INVITE (with our tag and Contact; an SDP ``body`` if given)."""
        response = make_response(self.invite, status, to_tag=self.dialog.local_tag, reason=reason)
        if status > 100:
            response.add("Contact", self.dialog.contact)
        if body:
            response.add("Content-Type", "application/sdp")
            response.body = body.encode()
        self.transaction.respond(response)
        if 200 <= status < 300:
            self.session.spawn(self._retransmit_2xx(response, self.transaction, self.acknowledged))

    def accept(self, update: Optional[SessionUpdate], local_address: str, rtp_port: int) -> None:
        """Answer the call: apply ``update`` (parsed at the edge), 200 OK with the SDP answer,
        start the session, the media and the watchdogs. Raises CallStateError unless ringing,
        ClientError when ``update`` cannot apply (nothing changed then)."""
        if self.state != "ringing" or self.end_reason is not None:
            raise CallStateError(f"call {self.id} is {self.state}")
        session = self.session
        if update is not None:
            session.realtime.apply_update(update)
        self.state = "answered"
        self._answered_at = (local_address, rtp_port)
        self.answer_sdp = build_answer(self.offer, local_address, rtp_port, self._origin)
        self.respond(200, body=self.answer_sdp)
        session.realtime.start()
        self._track = session.lease.new_output_track()
        session.spawn(self.rtp.play(self._track, SAMPLE_RATE))
        timeout_s = self.config.media_timeout_s
        media = CallerMedia(
            rate=session.lease.input_rate,
            on_audio=session.lease.submit_audio,
            on_gone=lambda: session.hangup_soon(EndReason.MEDIA_TIMEOUT, f"no RTP from the caller for {timeout_s:g} s"),
            media_timeout_s=timeout_s,
            packets_received=self._packets_received,
        )
        self.rtp.on_audio = media.audio
        self._media = media
        self._follow_direction()
        session.spawn(media.run())
        session.spawn(session.watch())

    def acknowledge(self, sequence: Optional[int] = None) -> None:
        """The caller's ACK of a 2xx (RFC 3261 13.3.1.4), ``sequence`` its CSeq number: the 200 OK
        of the INVITE (or of the re-INVITE of that number) stops; after the first, RTP may start."""
        pending = self._reinvites.pop(sequence, None) if sequence is not None else None
        if pending is not None:
            pending.set()
            return
        self.acknowledged.set()
        self.rtp.acknowledged()

    async def _packets_received(self) -> Optional[int]:
        return self.rtp.packets

    async def _retransmit_2xx(
        self, response: SipResponse, transaction: ServerTransaction, acknowledged: asyncio.Event
    ) -> None:
        """RFC 3261 13.3.1.4: the 2xx of an INVITE or re-INVITE again at T1, doubling to T2, until
        ``acknowledged`` is set by its ACK (whatever the transport; over UDP within the transaction's
        :class:`RetransmitBudget`); none within 64*T1: the call ends (BYE)."""
        timers = transaction.timers
        encoded = response.encode()
        interval = timers.t1
        deadline = time.monotonic() + timers.timeout
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(acknowledged.wait(), interval)
                return
            except TimeoutError:
                if self.end_reason is not None:
                    return
                transaction.retransmit(encoded)  # over UDP within its budget (a spoofed caller)
                interval = min(2 * interval, timers.t2)
        log.info("call %s: no ACK for the 200 OK (%s)", self.id, response.get("CSeq"))
        self.session.hangup_soon(EndReason.ACK_TIMEOUT, "the caller did not acknowledge the answer")

    # ----- requests of the caller -----
    def on_request(self, request: SipRequest, transaction: ServerTransaction) -> None:
        """An in-dialog request (not ACK): BYE, INFO (``application/dtmf-relay``), NOTIFY (of our
        REFER), a re-INVITE (:meth:`_reoffer`), OPTIONS; others: 405."""
        method = request.method
        status = 200
        body = warning = retry_after = reason = ""
        if method == "BYE":
            transaction.respond(make_response(request, 200, to_tag=self.dialog.local_tag))
            self.session.hangup_soon(EndReason.CALLER_BYE)
            return
        if method == "INFO":
            self._on_info(request)
        elif method == "NOTIFY":
            self._on_notify(request)
        elif method == "INVITE" and self.state == "ringing":
            # RFC 3261 14.2: an INVITE on the dialog before the first one's final response
            status, retry_after = 500, str(random.randint(0, 10))
        elif method == "INVITE":
            try:
                body = self._reoffer(request)
            except SdpError as exc:
                status, warning, reason = 488, exc.warning, exc.reason
        elif method not in ("OPTIONS", "UPDATE"):
            status = 405
        response = make_response(request, status, to_tag=self.dialog.local_tag, reason=reason)
        if status == 405:
            response.add("Allow", "INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, NOTIFY")
        if status == 500:
            response.add("Retry-After", retry_after)
        if warning:
            response.add("Warning", warning)
        if body:
            response.add("Contact", self.dialog.contact)
            response.add("Content-Type", "application/sdp")
            response.body = body.encode()
        transaction.respond(response)
        if method == "INVITE" and status == 200:
            acknowledged = self._reinvites[request.cseq[0]] = asyncio.Event()
            self.session.spawn(self._retransmit_2xx(response, transaction, acknowledged))

    def _reoffer(self, request: SipRequest) -> str:
        """The answer to a re-INVITE (RFC 3264 8): a session refresh repeats the answer; an offer
        with a new media address or port moves the RTP there (:meth:`RtpStream.move`; not an
        unspecified address ``c=0.0.0.0``: the old way to hold); a new direction is mirrored and
        followed (:meth:`_follow_direction`: hold and resume), and so are its voice codec (at the
        call's clock rate: PCMU and PCMA, or Opus under another payload type; the offer's order,
        RFC 3264 8.3.2, answered and sent from the answer on, :meth:`RtpStream.use_codec`) and its
        ``telephone-event``; new SRTP keys (RFC 4568 7.1.4) re-key what comes in and are answered
        with the offer's tag and our key. The answer's ``a=ptime:20`` is what the gateway sends
        whatever the offer's ``a=ptime`` (RFC 8866 6.4: a recommendation), as at the INVITE.
        An offer whose audio stream has port 0 removes it (RFC 3264 8.2, not a hold): answered
        with port 0, no media flows and the media timeout runs (:meth:`_remove_stream`); a later
        offer with a port brings a stream back, latched anew. The audio stream is read at the
        call's m-line position (``offer.slot``: RFC 3264 8, positions are fixed for the session;
        another media type there removes it too); every other m-line, those added at the end
        included, is answered with port 0 (RFC 3264 6). An offer that removes the call's stream
        and adds another audio stream the gateway can answer (RFC 3264 8.1: below the previous
        offer's m-lines or in a slot it disabled; a bridge replacing its leg; :func:`added_stream`:
        a stream answered with port 0 before stays rejected) moves the call to that one: its m-line
        becomes the call's slot, the RTP moves there and latches anew, as for a stream brought
        back (under SRTP with a new inbound session: its sequence numbers may start again). An
        answer that changed takes the ``o=`` version one up. A re-INVITE without SDP gets the
        current answer. Raises SdpError (-> 488, the call goes on as it was) for an offer that
        cannot be answered, or that offers no voice codec at the call's clock rate (Opus <->
        G.711) or drops or adds SRTP (not supported mid-call; a new stream too), or that has fewer
        m-lines than the session."""
        if request.content_type != "application/sdp" or not request.body:
            return self.answer_sdp
        sdp = request.body.decode("utf-8", "replace")
        lines = media_lines(sdp, at_least=len(self.offer.lines))
        rate = self.offer.voice.clock_rate
        if removed_stream(sdp, self.offer.slot):
            try:  # an audio stream the offer adds (the call's, with port 0, is not taken)
                offer = added_stream(sdp, self.offer.lines, self.srtp_policy, rate)
            except SdpError:
                self._remove_stream()
                self.offer = replace(self.offer, lines=lines)
                return self._answer()
        else:
            offer = parse_offer(sdp, self.srtp_policy, slot=self.offer.slot, clock_rate=rate)
        current, offered = self.offer.keys, offer.keys
        if (current is None) != (offered is None):
            raise SdpError("turning SRTP on or off mid-call is not supported")
        moved = (offer.address, offer.port) != (self.offer.address, self.offer.port)
        new_stream = offer.slot != self.offer.slot
        renewed = new_stream or self.rtp.removed  # a stream added or brought back (RFC 3264 8.2)
        if (moved or renewed) and not _unspecified_address(offer):
            # a stream brought back or added is a new one (RFC 3264 8.2), maybe with a new SSRC: latch again
            self.rtp.move((offer.address, offer.port), self._latch_trust(offer.address))
            self.offer = replace(self.offer, address=offer.address, port=offer.port)
        if new_stream:
            at = (offer.slot + 1, offer.address, offer.port)
            log.info("call %s: the audio stream moves to m-line %d (%s:%d)", self.id, *at)
        elif self.rtp.removed:
            log.info("call %s: the audio stream is back (%s:%d)", self.id, offer.address, offer.port)
        self.rtp.removed = False
        # the voice codec and telephone-event as offered now (a payload type may change, a new
        # stream's often does): the answer lists only the offer's formats (RFC 3264 6.1) and the
        # gateway sends in them from its answer on (8.3.2)
        self.rtp.use_codec(offer.payload_type, offer.voice)
        self.rtp.telephone_event = offer.telephone_event
        self.rtp.telephone_event_rate = offer.telephone_event_rate
        self.offer = replace(
            self.offer,
            direction=offer.direction,
            lines=offer.lines,
            slot=offer.slot,
            payload_type=offer.payload_type,
            voice=offer.voice,
            telephone_event=offer.telephone_event,
            telephone_event_rate=offer.telephone_event_rate,
        )
        self._follow_direction(held_by_address=_unspecified_address(offer))
        if current is not None and offered is not None and self.rtp.srtp is not None:
            was = (current.tag, current.suite, current.remote_key)
            changed = (offered.tag, offered.suite, offered.remote_key) != was
            if changed or renewed:
                local_key = current.local_key if offered.suite == current.suite else offered.local_key
                keys = SdesKeys(offered.tag, offered.suite, offered.remote_key, local_key)
                # a new stream may start its sequence numbers again: a new inbound session
                self.rtp.srtp.rekey(keys, new_stream=renewed)
                self.offer = replace(self.offer, keys=keys)
            if changed:
                log.info("call %s: the caller's re-INVITE changed its SRTP key (tag %s)", self.id, offered.tag)
        return self._answer()

    def _answer(self) -> str:
        """The answer to the offer as followed now; one that changed takes the next ``o=`` version."""
        removed = self.rtp.removed
        answer = build_answer(self.offer, *self._answered_at, self._origin, removed=removed)
        if answer != self.answer_sdp:
            self._origin = (self._origin[0], self._origin[1] + 1)
            self.answer_sdp = build_answer(self.offer, *self._answered_at, self._origin, removed=removed)
        return self.answer_sdp

    def _remove_stream(self) -> None:
        """The caller's offer removed the audio stream (port 0, RFC 3264 8.2): nothing is sent nor
        taken from what still comes, the reply waits unplayed (as on hold), and, unlike a hold, the
        media timeout runs: a voice call with no stream left ends with a BYE unless a later
        re-INVITE brings one back."""
        if not self.rtp.removed:
            log.info("call %s: the caller's offer removed the audio stream (port 0)", self.id)
        self.rtp.removed = True
        self.rtp.sending = False
        self.rtp.listening = False
        if self._media is not None:
            self._media.paused = False
        self.session.lease.suspend_playout(True)

    def _follow_direction(self, held_by_address: bool = False) -> None:
        """Follow the direction of the caller's offer (RFC 3264 6.1, 8.4): the gateway sends only
        when the caller receives (``sendrecv``, ``recvonly``) at a real address; anything but
        ``sendrecv`` (``sendonly``: a PBX's hold, often with music; ``inactive``), or an unspecified
        address (``held_by_address``, RFC 2543's hold), holds the call: what comes in (hold music)
        is not heard, as if the caller were silent, and no media does not end the call (the media
        timeout waits). While the caller does not receive, the reply being spoken stops where it
        is and goes on from there when it does again (``UnitLease.suspend_playout``); a response
        made meanwhile waits for it too."""
        direction = self.offer.direction
        held = direction != "sendrecv" or held_by_address
        sending = direction in ("sendrecv", "recvonly") and not held_by_address
        if held != (not self.rtp.listening):
            log.info("call %s: %s (the caller's offer: %s)", self.id, "on hold" if held else "resumed", direction)
        self.rtp.sending = sending
        self.rtp.listening = not held
        if self._media is not None:
            self._media.paused = held
        self.session.lease.suspend_playout(not sending)

    def _on_info(self, request: SipRequest) -> None:
        """SIP INFO with ``application/dtmf-relay`` (``Signal=5``, ``Duration=160``): a key press."""
        if request.content_type != "application/dtmf-relay":
            return
        for line in request.body.decode("utf-8", "replace").splitlines():
            name, _, value = line.partition("=")
            signal = value.strip().upper()
            if name.strip().lower() == "signal" and len(signal) == 1 and signal in "0123456789*#ABCD":
                self.key_press(signal)

    def on_key(self, press: KeyPress) -> None:
        """An RFC 4733 key press from the RTP stream."""
        self.key_press(press.digit)

    def key_press(self, digit: str) -> None:
        """A key press of an answered call: the door's (``dtmf_event_received``, barge-in...)."""
        if self.state == "answered":
            self.session.key_press(digit)

    # ----- transfer (RFC 3515) -----
    async def refer(self, target_uri: str) -> SipResponse:
        """Send REFER with ``Refer-To: <target_uri>``; returns its final response. The NOTIFY that
        reports a 2xx of the transfer then ends the call with a BYE. Raises CallStateError unless
        answered, TimeoutError when the caller does not answer the REFER, OSError when it cannot
        be sent (the next hop does not resolve or is not a SIP URI)."""
        if self.state != "answered" or self.end_reason is not None:
            raise CallStateError(f"call {self.id} is {self.state}")
        request = self.dialog.request("REFER")
        request.add("Refer-To", f"<{target_uri}>")
        request.add("Referred-By", f"<{self.dialog.local_uri}>")
        try:
            return await self._send_request(request, self.request_budget)
        except ValueError as exc:  # SipParseError: an unroutable next hop
            raise OSError(f"REFER cannot be routed: {exc}") from exc

    def _on_notify(self, request: SipRequest) -> None:
        """A NOTIFY of the REFER's implicit subscription: a ``message/sipfrag`` status line; a 2xx
        means the caller reached the target, so our leg ends (BYE)."""
        if (request.get("Event") or "").split(";")[0].strip().lower() != "refer":
            return
        first = request.body.decode("utf-8", "replace").strip().splitlines()[:1]
        parts = first[0].split() if first else []
        if len(parts) >= 2 and parts[0] == "SIP/2.0" and is_digits(parts[1]):
            status = int(parts[1])
            log.info("call %s: transfer reports %d", self.id, status)
            if 200 <= status < 300:
                self.session.hangup_soon(EndReason.CALL_REFERRED)
