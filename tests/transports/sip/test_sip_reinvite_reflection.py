"""Re-INVITEs moving a call's media to addresses that never send RTP (a caller reflecting the
gateway's stream at a victim): each move gave the new address a fresh second of RTP; what goes
to unproven addresses is now bounded over the call (``rtp.MAX_UNPROVEN_PACKETS_PER_CALL``)."""

from __future__ import annotations

import asyncio

import pytest

from gateway.server.app_keys import SIP
from gateway.transports.sip import rtp
from gateway.transports.sip.message import parse_name_addr
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import MediaPort, media_port, offered
from tests.transports.sip.sip_socket import SipSocket


@pytest.mark.slow
async def test_reinvites_moving_the_media_to_addresses_that_never_answer_get_a_bounded_stream(models, gateway_config):
    """A caller (trusted, in its dialog) re-INVITEs its media to two ports of a victim (127.0.0.9)
    in turn, every 1.1 s; the victim never sends RTP. Each move gave the new address a fresh 1 s
    (MAX_UNPROVEN_PACKETS): 5 moves sent it ~250 packets; the call's unproven packets are now
    bounded in all (MAX_UNPROVEN_PACKETS_PER_CALL), and the call itself goes on."""
    config = sip_config(gateway_config, media_timeout_s=30.0)
    loop = asyncio.get_running_loop()
    own_socket, _own, own_port = await media_port()
    victims = [await loop.create_datagram_endpoint(MediaPort, local_addr=("127.0.0.9", 0)) for _ in range(2)]
    ports = [transport.get_extra_info("sockname")[1] for transport, _ in victims]
    victim_sdp = sip_samples.BARESIP_SDP.replace("c=IN IP4 {rtp_host}", "c=IN IP4 127.0.0.9")
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=own_port))
            ok = await caller.response(200, within=15)
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKreflack", caller_port=caller.port))
            for move in range(5):
                await offered(caller, port, tag, victim_sdp, ports[move % 2], 39458 + move)
                await asyncio.sleep(1.1)
            received = sum(len(media.datagrams) for _, media in victims)
            assert 0 < received <= rtp.MAX_UNPROVEN_PACKETS_PER_CALL, received
            call = next(iter(app[SIP].calls.values()))
            assert call.end_reason is None
            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39470))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        own_socket.close()
        for transport, _ in victims:
            transport.close()
