"""A forged INVITE against a real gateway (real pool and models, no webhook: auto-accept) on
loopback. Its SDP ``c=`` and its ``Contact`` name a victim, 127.0.0.3, that never sends a packet:
no RTP reaches the victim before the ACK and at most a second of it after; the 200 OK's
retransmissions and the BYE stay within the INVITE's reflection budget. From a source that is not
``sip_trusted`` the INVITE gets 403 and claims no unit."""

from __future__ import annotations

import asyncio

from gateway.server.app_keys import SIP
from gateway.transports.sip import rtp, transactions
from gateway.transports.sip.message import SipRequest, SipResponse, parse_message, parse_name_addr
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket

VICTIM = "127.0.0.3"


class _Victim(asyncio.DatagramProtocol):
    """A UDP port of the victim: keeps every datagram that reaches it, and never answers."""

    def __init__(self) -> None:
        self.datagrams: list[bytes] = []

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.datagrams.append(data)


async def _victim_port() -> tuple[asyncio.DatagramTransport, _Victim, int]:
    loop = asyncio.get_running_loop()
    transport, victim = await loop.create_datagram_endpoint(_Victim, local_addr=(VICTIM, 0))
    return transport, victim, transport.get_extra_info("sockname")[1]


async def test_a_forged_invite_sends_no_stream_to_the_address_it_names(models, gateway_config):
    config = sip_config(gateway_config, pool_size=1, media_timeout_s=3.0, sip_trusted="127.0.0.1")
    media_socket, media, media_port = await _victim_port()
    signalling_socket, signalling, signalling_port = await _victim_port()
    try:
        async with serve(config, models) as (_, app), SipSocket(app[SIP].port) as source:
            port = app[SIP].port
            async with SipSocket(port, host="127.0.0.2") as stranger:  # not sip_trusted, no webhook
                stranger.send(sip_samples.invite(port, caller_port=stranger.port, branch="z9hG4bKstranger"))
                assert (await stranger.response()).status == 403
                assert not app[SIP].calls and app_idle(app)
            invite = sip_samples.invite(port, caller_port=source.port, rtp_host=VICTIM, rtp_port=media_port)
            contact = f"<sip:caller-0x562e96c30db0@127.0.0.1:{source.port}>".encode()
            invite = invite.replace(contact, f"<sip:caller@{VICTIM}:{signalling_port}>".encode())
            source.send(invite)
            ok = await source.response(200, within=15)  # accepted at once: 127.0.0.1 is trusted
            await asyncio.sleep(1.5)  # no ACK yet: a forged source never sends one
            assert media.datagrams == [], len(media.datagrams)  # (before: a packet every 20 ms)
            tag = parse_name_addr(ok.get("To") or "").tag
            source.send(sip_samples.ack(port, tag, branch="z9hG4bKforgedack", caller_port=source.port))
            assert await wait_until(lambda: not app[SIP].calls, 15)  # the media timeout: nobody spoke
            assert await wait_until(lambda: signalling.datagrams != [], 15)  # the BYE, to the Contact
            await asyncio.sleep(2.0)
            assert await wait_until(lambda: app_idle(app), 15)
            to_source = source.drain()
        assert 1 <= len(media.datagrams) <= rtp.MAX_UNPROVEN_PACKETS, len(media.datagrams)
        byes = [parse_message(data) for data in signalling.datagrams]
        assert all(isinstance(bye, SipRequest) and bye.method == "BYE" for bye in byes)
        responses = [message for message in to_source if isinstance(message, SipResponse)]
        assert all(response.status == 200 for response in responses)  # the 200 OK's retransmissions
        invite_bytes = len(invite)
        retransmitted = responses + byes[1:]
        assert len(retransmitted) <= transactions.MAX_RETRANSMISSIONS, len(retransmitted)
        assert sum(len(message.encode()) for message in retransmitted) <= (
            transactions.RETRANSMIT_FACTOR * invite_bytes
        )
    finally:
        media_socket.close()
        signalling_socket.close()
