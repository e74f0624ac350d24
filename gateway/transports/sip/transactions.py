"""The SIP transaction layer (RFC 3261 section 17) for a user agent server that also sends a few
in-dialog requests (BYE, REFER): server transactions for every request it receives, non-INVITE
client transactions for the requests it sends. All on the event loop; timers are ``call_later``.

- **INVITE server transaction** (17.2.1): a retransmitted INVITE gets the last response again; after
  a 2xx it is absorbed for Timer L (RFC 6026 "Accepted"; the dialog's core retransmits the 2xx
  until the ACK, 13.3.1.4); a 300-699 is
  retransmitted over UDP (Timer G: T1, doubling, at most T2) until the ACK, given up after
  Timer H (64*T1); after the ACK it absorbs ACK retransmissions for T4 (Timer I).
- **Non-INVITE server transaction** (17.2.2): a retransmitted request gets the final response
  again for 64*T1 over UDP (Timer J); over TCP the transaction ends with its final response.
- **Non-INVITE client transaction** (17.1.2): the request is retransmitted over UDP (Timer E: T1,
  doubling, at most T2) until a final response, given up after Timer F (64*T1).

Expiry: a server transaction that got no final response from its core within ``expiry`` seconds
(an INVITE: like a proxy's Timer C, 16.6; the user agent gives the accept timeout plus a margin;
any other request: 64*T1) is answered 500 and ends as usual, so a faulty core leaks nothing.

Caps: at most :data:`MAX_SERVER_TRANSACTIONS` live server transactions, and
:data:`MAX_SERVER_TRANSACTIONS_PER_SOURCE` per source IP; a new request beyond them is answered 503
statelessly (with Retry-After) and holds nothing, so a flood of spoofed requests (each kept for
64*T1 over UDP) cannot fill the memory.

Reflection (a spoofed UDP source): every response goes to the address the request came from
(RFC 3581), a retransmitted request from any other address is not answered, and the final
response's retransmissions over UDP (Timer G; the 2xx's, 13.3.1.4) stop at
:data:`MAX_RETRANSMISSIONS`, or once they would exceed :data:`RETRANSMIT_FACTOR` times the
request's bytes (:class:`RetransmitBudget`), whichever comes first; a non-2xx is never
retransmitted after Timer H. The requests the gateway sends in the dialog an INVITE made (BYE,
REFER) go where that INVITE said (its Contact, its Record-Route), so their Timer E
retransmissions over UDP draw on the same budget as the INVITE's responses. So a forged INVITE
makes the gateway send a victim a few times its own size, not the 11 retransmissions of 64*T1.

Matching (17.2.3, 17.1.3): a request by its top Via's branch, sent-by and method (ACK matches the
INVITE); a response by its top Via's branch and CSeq method.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, Protocol

from gateway.transports.sip.message import BRANCH_COOKIE, SipRequest, SipResponse, make_response, parse_via

log = logging.getLogger(__name__)

MAX_SERVER_TRANSACTIONS = 2048  # with 16 KiB messages: at most 32 MiB of requests held
MAX_SERVER_TRANSACTIONS_PER_SOURCE = 256  # one trunk or proxy sends everything from one IP
MAX_RETRANSMISSIONS = 7  # T1 .. T2 with the defaults: 0.5+1+2+4+4+4+4 = 19.5 s of them
RETRANSMIT_FACTOR = 4  # retransmitted bytes per byte of the request, at most


@dataclass(frozen=True)
class Timers:
    """RFC 3261 timer bases, seconds: ``t1`` (round-trip estimate, 500 ms), ``t2`` (the longest
    retransmit interval, 4 s), ``t4`` (the longest a message stays in the network, 5 s)."""

    t1: float = 0.5
    t2: float = 4.0
    t4: float = 5.0

    @property
    def timeout(self) -> float:
        """64*T1: Timers B, F, H, J (32 s with the defaults)."""
        return 64 * self.t1


class Peer(Protocol):
    """The other end of a message: where a response or request goes."""

    @property
    def reliable(self) -> bool:
        """True for TCP/TLS (no retransmissions), False for UDP."""

    @property
    def address(self) -> tuple[str, int]:
        """The remote (host, port) the message came from."""

    @property
    def transport(self) -> str:
        """The transport the message came over: UDP, TCP or TLS."""

    def send(self, data: bytes) -> None:
        """Send one encoded message (never raises: a failed send is logged and dropped)."""


def new_branch() -> str:
    """A fresh Via branch (RFC 3261 8.1.1.7: the magic cookie, then 96 random bits)."""
    return BRANCH_COOKIE + secrets.token_hex(12)


def request_key(request: SipRequest) -> tuple[str, str, str]:
    """(branch, sent-by, method) of ``request``: its server transaction (ACK and CANCEL keep
    their own method; use :meth:`TransactionLayer.invite_of` to find their INVITE). A branch
    without the magic cookie (RFC 2543 peers) is taken with the Call-ID, From tag and CSeq."""
    via = parse_via(request.get("Via") or "")
    sent_by = f"{via.host}:{via.port or ''}"
    branch = via.branch
    if not branch.startswith(BRANCH_COOKIE):
        branch = f"{branch}|{request.call_id}|{request.get('From')}|{request.cseq[0]}"
    return branch, sent_by, request.method


class RetransmitBudget:
    """What may still be retransmitted over UDP to a peer never proven real, for the request of
    ``request_bytes`` that started it all (an INVITE: its server transaction's responses, then its
    dialog's requests): :data:`MAX_RETRANSMISSIONS` messages and :data:`RETRANSMIT_FACTOR` *
    ``request_bytes`` bytes."""

    def __init__(self, request_bytes: int) -> None:
        self.count = 0
        self.bytes = 0
        self.limit_bytes = RETRANSMIT_FACTOR * request_bytes

    def take(self, size: int) -> bool:
        """True (and counted) when one more message of ``size`` bytes fits; False: stop."""
        if self.count >= MAX_RETRANSMISSIONS or self.bytes + size > self.limit_bytes:
            return False
        self.count += 1
        self.bytes += size
        return True


class ServerTransaction:
    """One received request and the responses to it. ``on_end()`` runs once it has ended;
    ``on_ack_timeout()`` when an INVITE's non-2xx final response got no ACK within Timer H.
    Without a final response within ``expiry`` seconds (None: 64*T1) it answers 500 itself."""

    def __init__(
        self,
        request: SipRequest,
        peer: Peer,
        timers: Timers,
        on_end: Callable[[], None],
        expiry: Optional[float] = None,
    ) -> None:
        self.request = request
        self.peer = peer
        self.timers = timers
        self.invite = request.method == "INVITE"
        self.state = "proceeding" if self.invite else "trying"
        self.last_response: Optional[SipResponse] = None
        self._encoded = b""
        self._on_end = on_end
        self._timers: list[asyncio.TimerHandle] = []
        self.on_ack_timeout: Callable[[], None] = lambda: None
        self.budget = RetransmitBudget(len(request.encode()))
        self._expiry = asyncio.get_running_loop().call_later(timers.timeout if expiry is None else expiry, self._expire)

    def _expire(self) -> None:
        if not self.final and self.state != "terminated":
            log.warning("no final response to %s %s: 500", self.request.method, self.request.call_id)
            self.respond(make_response(self.request, 500))

    @property
    def final(self) -> bool:
        """A final response was sent."""
        return self.last_response is not None and self.last_response.status >= 200

    def respond(self, response: SipResponse) -> None:
        """Send ``response`` (a provisional one only before any final; a second final is ignored)."""
        if self.final or self.state == "terminated":
            return
        self.last_response = response
        self._encoded = response.encode()
        self.peer.send(self._encoded)
        if response.status < 200:
            self.state = "proceeding"
            return
        self._expiry.cancel()
        if self.invite and response.status < 300:
            # RFC 6026 7.1 "Accepted": the dialog's core retransmits the 2xx (RFC 3261 13.3.1.4);
            # retransmitted INVITEs are absorbed here for Timer L (64*T1), not taken as new calls.
            self.state = "accepted"
            self._later(self.timers.timeout, self._end)
        elif self.invite:
            self.state = "completed"
            if not self.peer.reliable:
                self._later(self.timers.t1, lambda: self._retransmit(self.timers.t1))  # Timer G
            self._later(self.timers.timeout, self._no_ack)  # Timer H
        else:
            self.state = "completed"
            self._later(0 if self.peer.reliable else self.timers.timeout, self._end)  # Timer J

    def retransmitted(self, peer: Peer) -> None:
        """The same request again from ``peer``: the last response again (none yet: nothing, RFC
        3261 17.2.2); from another address than the request's: nothing (a forged copy)."""
        if peer.address != self.peer.address:
            return
        if self._encoded and self.state in ("proceeding", "completed"):
            self.peer.send(self._encoded)  # (in "accepted" it is absorbed: RFC 6026 8.7)

    def retransmit(self, data: bytes) -> bool:
        """Send ``data`` (the final response, again) unless the UDP budget is spent (see the
        module); False when it was not sent."""
        if not self.peer.reliable and not self.budget.take(len(data)):
            return False
        self.peer.send(data)
        return True

    def acknowledged(self) -> None:
        """An ACK for a non-2xx final response: stop retransmitting; absorb ACKs for Timer I."""
        if self.invite and self.state == "completed":
            self.state = "confirmed"
            self._cancel_timers()
            self._later(0 if self.peer.reliable else self.timers.t4, self._end)

    def _retransmit(self, interval: float) -> None:
        if self.state != "completed" or not self.retransmit(self._encoded):
            return  # acknowledged, or the budget is spent (Timer H still absorbs a late ACK)
        nxt = min(2 * interval, self.timers.t2)
        self._later(nxt, lambda: self._retransmit(nxt))

    def _no_ack(self) -> None:
        if self.state == "completed":
            log.info("no ACK for %s %d", self.request.method, self.last_response.status if self.last_response else 0)
            self.on_ack_timeout()
            self._end()

    def _later(self, delay: float, callback: Callable[[], None]) -> None:
        self._timers.append(asyncio.get_running_loop().call_later(delay, callback))

    def _cancel_timers(self) -> None:
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()

    def _end(self) -> None:
        if self.state == "terminated":
            return
        self.state = "terminated"
        self._expiry.cancel()
        self._cancel_timers()
        self._on_end()

    def close(self) -> None:
        """End now (shutdown)."""
        self._end()


class ClientTransaction:
    """One request sent (not INVITE, not ACK): :attr:`done` resolves with its final response, or
    with TimeoutError after Timer F. Over UDP its retransmissions (Timer E) stop early once
    ``budget`` is spent (see the module); Timer F still ends it."""

    def __init__(
        self, request: SipRequest, peer: Peer, timers: Timers, on_end: Callable[[], None], budget: RetransmitBudget
    ) -> None:
        self.request = request
        self.peer = peer
        self.timers = timers
        self.budget = budget
        self.done: asyncio.Future[SipResponse] = asyncio.get_running_loop().create_future()
        self._encoded = request.encode()
        self._on_end = on_end
        self._handles: list[asyncio.TimerHandle] = []
        loop = asyncio.get_running_loop()
        peer.send(self._encoded)
        if not peer.reliable:
            self._handles.append(loop.call_later(timers.t1, lambda: self._retransmit(timers.t1)))  # Timer E
        self._handles.append(loop.call_later(timers.timeout, self._timed_out))  # Timer F

    def _retransmit(self, interval: float) -> None:
        if self.done.done() or not self.budget.take(len(self._encoded)):
            return
        self.peer.send(self._encoded)
        nxt = min(2 * interval, self.timers.t2)
        self._handles.append(asyncio.get_running_loop().call_later(nxt, lambda: self._retransmit(nxt)))

    def received(self, response: SipResponse) -> None:
        """A response matched to this transaction: a final one ends it."""
        if response.status >= 200 and not self.done.done():
            self.done.set_result(response)
            self._finish()

    def _timed_out(self) -> None:
        if not self.done.done():
            self.done.set_exception(TimeoutError(f"no final response to {self.request.method} (Timer F)"))
            self.done.exception()  # retrieved: a caller that stopped waiting leaves no warning
        self._finish()

    def _finish(self) -> None:
        for handle in self._handles:
            handle.cancel()
        self._handles.clear()
        self._on_end()

    def close(self) -> None:
        """Give up now (shutdown): :attr:`done` fails with TimeoutError."""
        self._timed_out()


DEFAULT_TIMERS = Timers()


class TransactionLayer:
    """The live transactions. :meth:`receive_request` returns the new server transaction for a new
    request (not ACK: :meth:`absorb_ack`), None for a retransmission (answered here).
    ``invite_expiry``: seconds an INVITE may wait for its final response (see the module)."""

    def __init__(self, timers: Timers = DEFAULT_TIMERS, invite_expiry: float = 180.0) -> None:
        self.timers = timers
        self.invite_expiry = invite_expiry
        self.server: dict[tuple[str, str, str], ServerTransaction] = {}
        self.refused = 0  # new requests answered 503 over the caps
        self._per_source: dict[str, int] = {}
        self.client: dict[tuple[str, str], ClientTransaction] = {}

    def receive_request(self, request: SipRequest, peer: Peer) -> Optional[ServerTransaction]:
        """Match ``request`` (parsed, checked) to a transaction (see the class docstring); None
        also when the caps are reached (answered 503 here, see the module)."""
        key = request_key(request)
        existing = self.server.get(key)
        if existing is not None:
            existing.retransmitted(peer)
            return None
        source = peer.address[0]
        held = self._per_source.get(source, 0)
        if len(self.server) >= MAX_SERVER_TRANSACTIONS or held >= MAX_SERVER_TRANSACTIONS_PER_SOURCE:
            self.refused += 1
            if self.refused % 1000 == 1:
                log.warning("SIP transactions full (%d live, %d from %s): 503", len(self.server), held, source)
            busy = make_response(request, 503)
            busy.add("Retry-After", "5")
            peer.send(busy.encode())
            return None
        expiry = self.invite_expiry if request.method == "INVITE" else None
        transaction = ServerTransaction(request, peer, self.timers, lambda: self._forget_server(key), expiry)
        self.server[key] = transaction
        self._per_source[source] = held + 1
        return transaction

    def _forget_server(self, key: tuple[str, str, str]) -> None:
        transaction = self.server.pop(key, None)
        if transaction is None:
            return
        source = transaction.peer.address[0]
        left = self._per_source.get(source, 1) - 1
        if left > 0:
            self._per_source[source] = left
        else:
            self._per_source.pop(source, None)

    def _forget_client(self, key: tuple[str, str]) -> None:
        self.client.pop(key, None)

    def absorb_ack(self, request: SipRequest) -> bool:
        """An ACK for a non-2xx final response of a live INVITE transaction (absorbed: True);
        False for any other ACK (an ACK for a 2xx is the dialog's, RFC 3261 17.2.3)."""
        invite = self.invite_of(request)
        if invite is None or invite.state not in ("completed", "confirmed"):
            return False
        invite.acknowledged()
        return True

    def invite_of(self, request: SipRequest) -> Optional[ServerTransaction]:
        """The INVITE server transaction a CANCEL (or ACK) names by its branch, if still live."""
        branch, sent_by, _ = request_key(request)
        return self.server.get((branch, sent_by, "INVITE"))

    def send_request(
        self, request: SipRequest, peer: Peer, budget: Optional[RetransmitBudget] = None
    ) -> ClientTransaction:
        """Send ``request`` (a fresh top Via with :func:`new_branch` already set) in a client
        transaction whose retransmissions draw on ``budget`` (None: one of the request's own size)."""
        key = (parse_via(request.get("Via") or "").branch, request.method)
        if budget is None:
            budget = RetransmitBudget(len(request.encode()))
        transaction = ClientTransaction(request, peer, self.timers, lambda: self._forget_client(key), budget)
        if not transaction.done.done():
            self.client[key] = transaction
        return transaction

    def receive_response(self, response: SipResponse) -> bool:
        """Hand ``response`` to its client transaction; False when none matches (dropped)."""
        try:
            branch = parse_via(response.get("Via") or "").branch
            method = response.cseq[1]
        except ValueError:
            return False
        transaction = self.client.get((branch, method))
        if transaction is None:
            return False
        transaction.received(response)
        return True

    def close(self) -> None:
        """End every transaction (shutdown)."""
        for server in list(self.server.values()):
            server.close()
        for client in list(self.client.values()):
            client.close()
