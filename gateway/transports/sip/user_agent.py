"""The gateway's SIP user agent server: incoming calls over UDP, TCP and TLS, and their control
(accept, reject, refer, hang up), in the shape of OpenAI's SIP interface.

Incoming call (RFC 3261 13.3): ``100 Trying`` at once; an offer that cannot be answered gets
``488`` (no codec, no usable SRTP key, plain RTP where ``sip_srtp`` requires SRTP:
``gateway.transports.sip.sdp``); a call the door refuses (a draining gateway, a full pool, busy compute,
a source that is no ``sip_trusted`` one holding ``max_sessions_per_source`` calls:
``gateway.transports.door.Refused``) ``503`` with ``Retry-After`` (a proxy or trunk tries another
gateway) and the refusal's code in a ``Warning``; else a unit is claimed,
``180 Ringing`` sent and the backend told with a signed ``realtime.call.incoming`` webhook
(``gateway.transports.sip.webhook``). The backend then accepts (200 OK + SDP answer) or rejects
(its status, 603 by default); without a webhook the call is accepted at once with the default
session, but only from a ``sip_trusted`` source (any other gets ``403`` and claims no unit:
``gateway.transports.sip.trust``). No decision within ``sip_accept_timeout_s`` (or a webhook that
was not delivered): 480.

Other requests: an in-dialog request goes to its call (``gateway.transports.sip.call``), one for
no known dialog gets ``481``; CANCEL ends a ringing call (200, then 487 to the INVITE); OPTIONS
outside a dialog gets 200 with ``Allow``; ``Max-Forwards: 0`` gets 483; an unknown method 405; a
``Require`` of any extension 420 (none is supported).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.pool.end_reason import EndReason
from gateway.realtime.session_update import SessionUpdate
from gateway.transports.door import Door, Refused
from gateway.transports.live_session import LiveSession
from gateway.transports.sip.call import CallStateError, SipCall
from gateway.transports.sip.dialog import Dialog
from gateway.transports.sip.message import (
    SipParseError,
    SipRequest,
    SipResponse,
    make_response,
    max_forwards,
    parse_name_addr,
)
from gateway.transports.sip.rtp import RtpStream
from gateway.transports.sip.sdp import SdpError, parse_offer, srtp_policy
from gateway.transports.sip.settings import SipSettings
from gateway.transports.sip.srtp import SrtpContext
from gateway.transports.sip.transactions import (
    DEFAULT_TIMERS,
    RetransmitBudget,
    ServerTransaction,
    Timers,
    TransactionLayer,
)
from gateway.transports.sip.transport import SipPeer, SipTransport
from gateway.transports.sip.trust import is_trusted, latch_sources
from gateway.transports.sip.webhook import WebhookSender, incoming_call_event
from gateway.transports.transport import TransportKind

log = logging.getLogger(__name__)

ALLOW = "INVITE, ACK, BYE, CANCEL, OPTIONS, INFO, NOTIFY"
_KNOWN = {"INVITE", "ACK", "BYE", "CANCEL", "OPTIONS", "INFO", "NOTIFY", "UPDATE", "REFER", "PRACK", "MESSAGE"}


async def resolve(address: tuple[str, int]) -> tuple[str, int]:
    """``address`` with its host as an IP address (a hostname resolved with ``getaddrinfo`` in
    the loop's executor, never blocking the loop). Raises OSError when it does not resolve."""
    host, port = address
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host.strip("[]"), port
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    if not infos:
        raise OSError(f"{host} does not resolve")
    return str(infos[0][4][0]), port


def refused_response(invite: SipRequest, refused: Refused) -> SipResponse:
    """The answer to an INVITE the door refused: ``503 Service Unavailable`` with ``Retry-After``
    (RFC 3261 21.5.4, 20.33) and the refusal's code in a ``Warning`` (20.43: 399, miscellaneous)."""
    response = make_response(invite, 503)
    response.add("Retry-After", str(refused.retry_after_s))
    response.add("Warning", f'399 voice-gateway "{refused.code}"')
    return response


class CallNotFound(LookupError):
    """No live call of that id (never was, or already ended)."""


class SipUserAgent:
    """The SIP side of the gateway on ``config.sip_host``:``config.sip_port`` (UDP and TCP; TLS on
    ``sip_tls_port`` with a certificate); each call's session is opened through ``door`` (its
    admission and counts, metrics, watchdogs, hang-up and sideband are the door's: a call the door
    refuses gets 503). ``calls`` maps the call ids (``sip_...``) to live calls. ``untrusted``
    counts the INVITEs refused (403) for coming from no ``sip_trusted`` source without a webhook.
    ``on_srtp_dropped(reason)`` is called for each SRTP packet of any call dropped
    (``authentication``, ``replay``: the metrics). ``settings``: ``config``'s SIP settings when
    read already (the app reads them once, with the TLS files); None: read here. Raises ValueError
    for unusable SIP settings
    (:meth:`SipSettings.from_config <gateway.transports.sip.settings.SipSettings.from_config>`).
    """

    def __init__(
        self,
        config: GatewayConfig,
        door: Door,
        *,
        settings: Optional[SipSettings] = None,
        timers: Timers = DEFAULT_TIMERS,
    ) -> None:
        self.config = config
        settings = settings if settings is not None else SipSettings.from_config(config)
        self.host, self.public_address = settings.host, settings.public_address
        self.transport = SipTransport(self.host, config.sip_port, self._on_message, settings.tls, config.sip_tls_port)
        # the INVITE's final response comes within the accept timeout (480), plus a margin
        self.transactions = TransactionLayer(timers, invite_expiry=config.sip_accept_timeout_s + timers.timeout)
        self.webhook = (
            WebhookSender(config.sip_webhook_url, config.sip_webhook_secret) if config.sip_webhook_url else None
        )
        self.rtp_ports = settings.rtp_ports
        self.trusted = settings.trusted
        self.rtp_latch = settings.rtp_latch
        self.srtp = settings.srtp
        self.untrusted = 0
        self.on_srtp_dropped: Callable[[str], None] = lambda reason: None
        self.calls: dict[str, SipCall] = {}
        self._dialogs: dict[tuple[str, str], SipCall] = {}
        self._ringing: dict[int, SipCall] = {}  # id() of the INVITE's transaction -> its call
        self._door = door
        self._tasks: set[asyncio.Future[Any]] = set()
        self._byes: set[asyncio.Future[None]] = set()  # held: not collected mid-run

    @property
    def port(self) -> int:
        """The SIP port listened on (after :meth:`start`)."""
        return self.transport.port

    async def start(self) -> None:
        """Listen. Raises OSError when the port is taken."""
        await self.transport.start()
        log.info("SIP listening on %s:%d (UDP, TCP)", self.host, self.port)
        if self.transport.tls is not None:
            log.info("SIP over TLS listening on %s:%d", self.host, self.transport.tls_port)
        if self.webhook is not None and not self.config.sip_webhook_secret:
            log.warning(
                "SIP webhooks to %s are unsigned: give --sip-webhook-secret whsec_...", self.config.sip_webhook_url
            )

    # ----- dispatch -----
    def _on_message(self, message: SipRequest | SipResponse, peer: SipPeer) -> None:
        if isinstance(message, SipResponse):
            self.transactions.receive_response(message)
            return
        if message.method == "ACK":
            self._on_ack(message)
            return
        transaction = self.transactions.receive_request(message, peer)
        if transaction is None:
            return  # a retransmission, answered by its transaction
        try:
            self._on_request(message, transaction)
        except Exception:
            transaction.respond(make_response(message, 500))
            raise  # logged by the transport

    def _on_ack(self, ack: SipRequest) -> None:
        if self.transactions.absorb_ack(ack):
            return
        call = self._dialog_of(ack)
        if call is not None:
            call.acknowledge(ack.cseq[0])

    def _dialog_of(self, request: SipRequest) -> Optional[SipCall]:
        """The call of an in-dialog request: its Call-ID, To tag (ours) and From tag (the
        caller's) all match (RFC 3261 12.2.2)."""
        try:
            tag = parse_name_addr(request.get("To") or "").tag
            remote_tag = parse_name_addr(request.get("From") or "").tag
        except SipParseError:
            return None
        call = self._dialogs.get((request.call_id, tag)) if tag else None
        if call is None or remote_tag != call.dialog.remote_tag:
            return None
        return call

    def _on_request(self, request: SipRequest, transaction: ServerTransaction) -> None:
        method = request.method

        def answer(status: int, **headers: str) -> None:
            response = make_response(request, status)
            for name, value in headers.items():
                response.add(name.replace("_", "-"), value)
            transaction.respond(response)

        if method not in _KNOWN:
            answer(405, Allow=ALLOW)
            return
        if max_forwards(request) == 0 and method != "OPTIONS":
            answer(483)
            return
        if request.get("Require") and method not in ("CANCEL",):
            answer(420, Unsupported=", ".join(request.get_all("Require")))
            return
        if method == "CANCEL":
            self._on_cancel(request, transaction)
            return
        try:
            has_tag = bool(parse_name_addr(request.get("To") or "").tag)
        except SipParseError:
            answer(400)
            return
        if has_tag:
            call = self._dialog_of(request)
            if call is None or call.end_reason is not None:
                answer(481)
            else:
                call.on_request(request, transaction)
            return
        if method == "INVITE":
            self._on_invite(request, transaction)
        elif method == "OPTIONS":
            answer(200, Allow=ALLOW, Accept="application/sdp")
        else:
            answer(481)  # BYE, INFO, NOTIFY... outside a dialog

    def _on_cancel(self, cancel: SipRequest, transaction: ServerTransaction) -> None:
        invite = self.transactions.invite_of(cancel)
        call = self._ringing.get(id(invite)) if invite is not None else None
        if invite is None:
            transaction.respond(make_response(cancel, 481))
            return
        transaction.respond(make_response(cancel, 200))
        if call is not None:
            call.session.hangup_soon(EndReason.CALLER_CANCEL)
        elif not invite.final:
            invite.respond(make_response(invite.request, 487))

    # ----- incoming calls -----
    def _on_invite(self, invite: SipRequest, transaction: ServerTransaction) -> None:
        source = transaction.peer.address[0]
        if self.webhook is None and not is_trusted(source, self.trusted):
            self.untrusted += 1  # (no 100 Trying first: a forged source gets one answer, not two)
            if self.untrusted % 1000 == 1:
                log.info("INVITE from %s refused (403): not a sip_trusted source, and no webhook decides", source)
            transaction.respond(make_response(invite, 403))
            return
        transaction.respond(make_response(invite, 100))
        try:
            if invite.content_type != "application/sdp" or not invite.body:
                raise SdpError("an INVITE without an SDP offer (late offer) is not answered")
            policy = srtp_policy(self.srtp, transaction.peer.transport, invite.uri)
            offer = parse_offer(invite.body.decode("utf-8", "replace"), policy)  # port 0 too: SdpError
        except SdpError as exc:
            response = make_response(invite, 488, reason=exc.reason)
            response.add("Warning", exc.warning)
            transaction.respond(response)
            return
        peer = transaction.peer
        transport = peer.transport
        port = self.transport.tls_port if transport == "TLS" else self.port
        try:
            dialog = Dialog.from_invite(invite, transport, self.public_address, port)
        except SipParseError as exc:
            log.info("INVITE refused: %s", exc)
            transaction.respond(make_response(invite, 400))
            return
        calls: list[SipCall] = []

        def connect(session: LiveSession) -> SipCall:
            rtp = RtpStream(
                payload_type=offer.payload_type,
                codec=offer.voice,
                telephone_event=offer.telephone_event,
                telephone_event_rate=offer.telephone_event_rate,
                remote=(offer.address, offer.port),
                rate=session.lease.input_rate,
                trusted=latch_sources(self.rtp_latch, peer.address[0], offer.address),
                srtp=SrtpContext(offer.keys) if offer.keys is not None else None,
            )
            rtp.on_srtp_dropped = self.on_srtp_dropped
            call = SipCall(
                session,
                invite,
                transaction,
                offer,
                dialog,
                config=self.config,
                rtp=rtp,
                send_request=lambda request, budget: self._send_in_dialog(call, request, budget),
                on_closed=self._closed,
                srtp_policy=policy,
                latch_trust=lambda address: latch_sources(self.rtp_latch, peer.address[0], address),
            )
            calls.append(call)
            return call

        # a sip_trusted source is a trunk or proxy carrying many callers: no per-source limit
        limited = None if is_trusted(source, self.trusted) else source
        try:
            self._door.open(TransportKind.SIP, None, connect, source=limited)
        except Refused as refused:
            log.info("INVITE refused (%s): %s", refused.code, refused)
            transaction.respond(refused_response(invite, refused))
            return
        call = calls[0]
        self.calls[call.id] = call
        self.transport.pin(peer.transport, peer.address)  # the caller is reached on it while the call lasts
        self._dialogs[(dialog.call_id, dialog.local_tag)] = call
        self._ringing[id(transaction)] = call
        self._spawn(self._ring(call))

    async def _ring(self, call: SipCall) -> None:
        """Open the RTP port, send 180, tell the backend (or accept), and time the decision."""
        try:
            call.rtp_port = await call.rtp.open(self.host, self.rtp_ports)
        except OSError as exc:
            log.warning("call %s: no RTP port: %s", call.id, exc)
            await call.session.hangup(EndReason.SERVER_ERROR)
            return
        if call.end_reason is not None:
            call.rtp.close()
            return
        call.respond(180)
        if self.webhook is None:
            self.accept(call.id, None)
            return
        headers = [{"name": name, "value": value} for name, value in call.invite.headers]
        delivered = await self.webhook.deliver(incoming_call_event(call.id, headers))
        if not delivered:
            await call.session.hangup(EndReason.ACCEPT_TIMEOUT, "the webhook was not delivered")
            return
        try:
            await asyncio.wait_for(call.session.ended.wait(), self.config.sip_accept_timeout_s)
        except TimeoutError:
            if call.state == "ringing":
                log.info("call %s: not accepted within %g s", call.id, self.config.sip_accept_timeout_s)
                await call.session.hangup(EndReason.ACCEPT_TIMEOUT, "the backend did not accept the call in time")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _closed(self, call: SipCall) -> None:
        if call.bye is not None and not call.bye.done():
            self._byes.add(call.bye)
            call.bye.add_done_callback(self._byes.discard)
        if self.calls.pop(call.id, None) is not None:
            self.transport.unpin(call.transaction.peer.transport, call.transaction.peer.address)
        self._dialogs.pop((call.dialog.call_id, call.dialog.local_tag), None)
        self._ringing.pop(id(call.transaction), None)

    @property
    def byes_in_flight(self) -> int:
        """BYEs of ended calls still waiting for their final response (Timer E retransmits them
        over UDP): what a graceful shutdown waits for."""
        return len(self._byes)

    async def _send_in_dialog(self, call: SipCall, request: SipRequest, budget: RetransmitBudget) -> SipResponse:
        """Send an in-dialog request of ``call`` to its next hop (the connection the INVITE came
        on when that is the next hop, a hostname resolved off the event loop), its retransmissions
        within ``budget``; resolves with the final response. A call that came over TLS is sent to
        on the connection its INVITE came on while that is open (it is kept open for the call: a
        TLS phone seldom accepts connections, and one behind NAT cannot), whatever its Contact
        says; else a new TLS connection verifies the next hop's certificate for its host name.
        Raises TimeoutError, OSError."""
        peer = call.transaction.peer
        inbound = self.transport.connection(peer.transport, peer.address) if peer.transport == "TLS" else None
        if inbound is not None:
            return await self.transactions.send_request(request, inbound, budget).done
        transport, (host, port) = call.dialog.next_hop()
        address = await resolve((host, port))
        hop = await self.transport.connect(transport, address, server_hostname=host.strip("[]"))
        return await self.transactions.send_request(request, hop, budget).done

    # ----- control (the HTTP routes) -----
    def live(self, call_id: str) -> SipCall:
        """The live call ``call_id``. Raises CallNotFound."""
        call = self.calls.get(call_id)
        if call is None or call.end_reason is not None:
            raise CallNotFound(call_id)
        return call

    def ringing(self, call_id: str) -> bool:
        """Whether the live call ``call_id`` is ringing: not accepted (nor rejected) yet."""
        call = self.calls.get(call_id)
        return call is not None and call.end_reason is None and call.state == "ringing"

    def accept(self, call_id: str, update: Optional[SessionUpdate]) -> SipCall:
        """Answer a ringing call with ``update`` (parsed at the edge). Raises CallNotFound,
        CallStateError (already answered, or still opening its RTP port), ClientError."""
        call = self.live(call_id)
        port = call.rtp_port
        if port is None:
            raise CallStateError(f"call {call_id} is not ringing yet")
        call.accept(update, self.public_address, port)  # raises: still ringing (CANCEL, timeout work)
        self._ringing.pop(id(call.transaction), None)
        return call

    async def reject(self, call_id: str, status: int = 603) -> None:
        """Refuse a ringing call with ``status`` (400..699). Raises CallNotFound, CallStateError."""
        call = self.live(call_id)
        if call.state != "ringing":
            raise CallStateError(f"call {call_id} is {call.state}: hang up instead")
        call.respond(status)
        await call.session.hangup(EndReason.CALL_REJECTED)

    async def refer(self, call_id: str, target_uri: str) -> SipResponse:
        """Transfer an answered call to ``target_uri``. Raises CallNotFound, CallStateError,
        TimeoutError (the caller did not answer the REFER)."""
        return await self.live(call_id).refer(target_uri)

    async def close(self) -> None:
        """End every call (``server_shutdown``), stop listening."""
        calls = list(self.calls.values())
        await asyncio.gather(
            *(call.session.hangup(EndReason.SERVER_SHUTDOWN) for call in calls), return_exceptions=True
        )
        for task in list(self._tasks):
            task.cancel()
        self.transactions.close()
        await self.transport.close()
        if self.webhook is not None:
            await self.webhook.close()
