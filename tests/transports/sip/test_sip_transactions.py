"""RFC 3261 transactions on the event loop with short timers: an accepted INVITE absorbs its
retransmissions (RFC 6026), a rejected one is retransmitted until the ACK and given up after Timer
H, a non-INVITE answers its retransmissions, a client transaction retransmits until answered and
times out with Timer F."""

from __future__ import annotations

import asyncio

import pytest

from gateway.transports.sip import transactions
from gateway.transports.sip.message import SipRequest, make_response, parse_message
from gateway.transports.sip.transactions import Timers, TransactionLayer
from tests.doubles import RecordingPeerDouble
from tests.transports.sip import sip_samples

FAST = Timers(t1=0.02, t2=0.08, t4=0.05)


def _invite() -> SipRequest:
    message = parse_message(sip_samples.invite(5060))
    assert isinstance(message, SipRequest)
    return message


async def test_an_accepted_invite_absorbs_retransmissions_then_ends():
    layer, peer = TransactionLayer(FAST), RecordingPeerDouble()
    invite = _invite()
    transaction = layer.receive_request(invite, peer)
    assert transaction is not None
    transaction.respond(make_response(invite, 200, to_tag="t"))
    assert layer.receive_request(_invite(), peer) is None  # not a new call
    assert len(peer.sent) == 1  # absorbed: the dialog's core retransmits the 2xx itself
    await asyncio.sleep(FAST.timeout + 0.1)  # Timer L
    assert not layer.server


async def test_a_rejected_invite_is_retransmitted_until_timer_h():
    layer, peer = TransactionLayer(FAST), RecordingPeerDouble()
    invite = _invite()
    transaction = layer.receive_request(invite, peer)
    assert transaction is not None
    gave_up = []
    transaction.on_ack_timeout = lambda: gave_up.append(True)
    transaction.respond(make_response(invite, 486, to_tag="t"))
    await asyncio.sleep(FAST.timeout + 0.1)
    assert len(peer.sent) >= 5 and len(set(peer.sent)) == 1  # Timer G: the same 486 again
    assert gave_up == [True] and not layer.server


async def test_over_tcp_nothing_is_retransmitted():
    layer, peer = TransactionLayer(FAST), RecordingPeerDouble(reliable=True)
    invite = _invite()
    transaction = layer.receive_request(invite, peer)
    assert transaction is not None
    transaction.respond(make_response(invite, 603, to_tag="t"))
    await asyncio.sleep(0.2)
    assert len(peer.sent) == 1


async def test_non_invite_answers_retransmissions_with_its_final_response():
    layer, peer = TransactionLayer(FAST), RecordingPeerDouble()
    bye = parse_message(sip_samples.in_dialog("BYE", 5060, "t"))
    assert isinstance(bye, SipRequest)
    transaction = layer.receive_request(bye, peer)
    assert transaction is not None and layer.receive_request(bye, peer) is None  # nothing to resend yet
    transaction.respond(make_response(bye, 200, to_tag="t"))
    assert layer.receive_request(bye, peer) is None
    assert len(peer.sent) == 2 and peer.sent[0] == peer.sent[1]
    await asyncio.sleep(FAST.timeout + 0.1)  # Timer J
    assert not layer.server


async def test_client_transaction_retransmits_and_times_out():
    layer, peer = TransactionLayer(FAST), RecordingPeerDouble()
    bye = parse_message(sip_samples.in_dialog("BYE", 5060, "t"))
    assert isinstance(bye, SipRequest)
    transaction = layer.send_request(bye, peer)
    with pytest.raises(TimeoutError):
        await transaction.done
    assert len(peer.sent) >= 5 and not layer.client
    answered = layer.send_request(bye, peer)
    response = make_response(bye, 200)
    assert layer.receive_response(parse_message(response.encode()))  # type: ignore[arg-type]
    assert (await answered.done).status == 200 and not layer.client


async def test_an_invite_without_a_final_response_expires_with_500():
    # A core that never answers (a fault) must not leave the transaction live for ever.
    layer, peer = TransactionLayer(FAST, invite_expiry=0.05), RecordingPeerDouble()
    invite = _invite()
    transaction = layer.receive_request(invite, peer)
    assert transaction is not None
    transaction.respond(make_response(invite, 100))
    await asyncio.sleep(0.2)
    assert parse_message(peer.sent[-1]).status == 500  # type: ignore[union-attr]
    await asyncio.sleep(FAST.timeout + 0.1)  # Timer H: no ACK came
    assert not layer.server


async def test_server_transactions_are_capped_per_source_and_in_all(monkeypatch: pytest.MonkeyPatch):
    # A flood of spoofed requests must not hold memory for 64*T1 each without bound.
    monkeypatch.setattr(transactions, "MAX_SERVER_TRANSACTIONS", 6)
    monkeypatch.setattr(transactions, "MAX_SERVER_TRANSACTIONS_PER_SOURCE", 4)
    layer, flood, other, third = (
        TransactionLayer(FAST),
        RecordingPeerDouble(),
        RecordingPeerDouble(),
        RecordingPeerDouble(),
    )
    other.address = ("192.0.2.2", 5060)
    third.address = ("192.0.2.3", 5060)

    def options(branch: int) -> SipRequest:
        message = parse_message(sip_samples.options(5060, branch=f"z9hG4bK{branch}x"))
        assert isinstance(message, SipRequest)
        return message

    taken = [layer.receive_request(options(n), flood) for n in range(10)]
    assert sum(t is not None for t in taken) == 4 and len(layer.server) == 4
    assert [parse_message(sent).status for sent in flood.sent] == [503] * 6  # type: ignore[union-attr]
    assert layer.receive_request(options(20), other) is not None  # another source still gets in
    assert layer.receive_request(options(21), other) is not None
    assert layer.receive_request(options(22), third) is None and layer.refused == 7  # the whole cap
    for transaction in layer.server.copy().values():
        transaction.respond(make_response(transaction.request, 200))
    await asyncio.sleep(FAST.timeout + 0.1)  # Timer J
    assert not layer.server and layer.receive_request(options(30), flood) is not None


def _retransmitted_bytes(sent: list[bytes]) -> int:
    return sum(len(data) for data in sent[1:])  # after the first response


@pytest.mark.parametrize("with_sdp", [True, False])
async def test_a_spoofed_invite_gets_a_bounded_reflection(with_sdp: bool):
    # A forged UDP source (never ACKs): Timer G stops at the count or byte budget, and nothing
    # comes after Timer H.
    layer, victim = TransactionLayer(FAST), RecordingPeerDouble()
    invite = _invite()
    if not with_sdp:
        invite.body = b""
        invite.set("Content-Length", "0")
    transaction = layer.receive_request(invite, victim)
    assert transaction is not None
    transaction.respond(make_response(invite, 486, to_tag="t"))
    await asyncio.sleep(FAST.timeout + 0.1)  # Timer H
    assert not layer.server
    retransmissions = len(victim.sent) - 1
    assert 1 <= retransmissions <= transactions.MAX_RETRANSMISSIONS, retransmissions
    assert _retransmitted_bytes(victim.sent) <= transactions.RETRANSMIT_FACTOR * len(invite.encode())
    sent = len(victim.sent)
    await asyncio.sleep(0.3)
    assert len(victim.sent) == sent


async def test_the_2xx_is_retransmitted_within_the_same_budget():
    layer, victim = TransactionLayer(FAST), RecordingPeerDouble()
    invite = _invite()
    transaction = layer.receive_request(invite, victim)
    assert transaction is not None
    ok = make_response(invite, 200, to_tag="t")
    ok.body = b"v=0\r\n" * 40
    transaction.respond(ok)
    encoded = ok.encode()
    sent = [transaction.retransmit(encoded) for _ in range(20)]  # what the dialog core asks for
    assert sent[0] and not sent[-1] and sum(sent) <= transactions.MAX_RETRANSMISSIONS
    assert _retransmitted_bytes(victim.sent) <= transactions.RETRANSMIT_FACTOR * len(invite.encode())
    reliable = TransactionLayer(FAST).receive_request(_invite(), RecordingPeerDouble(reliable=True))
    assert reliable is not None and all(reliable.retransmit(encoded) for _ in range(20))  # TCP: not spoofable


async def test_a_retransmission_from_another_address_is_not_answered():
    layer, caller, forger = TransactionLayer(FAST), RecordingPeerDouble(), RecordingPeerDouble()
    forger.address = ("192.0.2.7", 5060)
    transaction = layer.receive_request(_invite(), caller)
    assert transaction is not None
    transaction.respond(make_response(_invite(), 486, to_tag="t"))
    assert layer.receive_request(_invite(), forger) is None  # the same transaction, forged source
    assert forger.sent == [] and len(caller.sent) == 1  # nobody answered (before Timer G's first)
    assert layer.receive_request(_invite(), caller) is None  # the caller's own retransmission
    assert len(caller.sent) == 2


async def test_a_bye_to_a_forged_address_shares_the_invites_budget():
    # A forged INVITE names where its dialog's BYE goes (Contact): the 2xx retransmitted to the
    # INVITE's source and the BYE's retransmissions to that address stay within one budget.
    layer, source, contact = TransactionLayer(FAST), RecordingPeerDouble(), RecordingPeerDouble()
    contact.address = ("192.0.2.9", 5060)
    invite = _invite()
    transaction = layer.receive_request(invite, source)
    assert transaction is not None
    ok = make_response(invite, 200, to_tag="t")
    transaction.respond(ok)
    for _ in range(2):
        transaction.retransmit(ok.encode())  # no ACK comes: the dialog core retransmits the 2xx
    bye = parse_message(sip_samples.in_dialog("BYE", 5060, "t"))
    assert isinstance(bye, SipRequest)
    with pytest.raises(TimeoutError):
        await layer.send_request(bye, contact, transaction.budget).done  # never answered: Timer F
    retransmitted = len(source.sent) - 1 + len(contact.sent) - 1
    assert len(contact.sent) >= 2 and retransmitted <= transactions.MAX_RETRANSMISSIONS, retransmitted
    assert _retransmitted_bytes(source.sent) + _retransmitted_bytes(contact.sent) <= (
        transactions.RETRANSMIT_FACTOR * len(invite.encode())
    )


async def test_a_request_without_a_dialog_budget_is_bounded_by_its_own_size():
    layer, victim = TransactionLayer(FAST), RecordingPeerDouble()
    bye = parse_message(sip_samples.in_dialog("BYE", 5060, "t"))
    assert isinstance(bye, SipRequest)
    with pytest.raises(TimeoutError):
        await layer.send_request(bye, victim).done
    assert 1 <= len(victim.sent) - 1 <= transactions.MAX_RETRANSMISSIONS  # (before: one every T2 until Timer F)
    assert _retransmitted_bytes(victim.sent) <= transactions.RETRANSMIT_FACTOR * len(bye.encode())
