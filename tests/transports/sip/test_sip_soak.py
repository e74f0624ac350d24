"""A bounded soak of short SIP calls from a bare SIP peer (real UDP on loopback), each announced by
the webhook and accepted over HTTP: calls ended by BYE, by a caller that vanishes (RTP stops: media
timeout, the gateway's BYE lost), by CANCEL while ringing, and refused when the pool is full;
afterwards no unit, socket, task or thread is left over."""

from __future__ import annotations

import asyncio
import os
import random
import struct
import threading
from typing import Any

import aiohttp
import pytest

from gateway.server.app_keys import SIP
from gateway.transports.sip.message import SipRequest, SipResponse, parse_name_addr
from gateway.transports.sip.sdp import parse_offer
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket

PCMU_SILENCE = b"\xff" * 160


class _Rtp(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.received = 0

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received += 1


async def _call(url: str, app: Any, index: int, ending: str) -> str:
    """One call from a fresh SIP socket and RTP port, accepted over HTTP unless ``ending`` is
    cancel (CANCEL while it rings); else ended by bye or vanish. Returns the INVITE's final status."""
    port = app[SIP].port
    loop = asyncio.get_running_loop()
    transport, rtp = await loop.create_datagram_endpoint(_Rtp, local_addr=("127.0.0.1", 0))
    rtp_port = transport.get_extra_info("sockname")[1]
    branch, call_id = f"z9hG4bKsoak{index}", f"soak-{index}"
    try:
        async with SipSocket(port) as peer:
            invite = sip_samples.invite(port, caller_port=peer.port, branch=branch, call_id=call_id, rtp_port=rtp_port)
            peer.send(invite)
            ringing = await _past_trying(peer)
            if ringing.status >= 200:  # the pool is full: 503
                return str(ringing.status)
            if ending == "cancel":
                peer.send(
                    sip_samples.cancel(port, caller_port=peer.port, branch=branch).replace(
                        b"d9c18dac2b108fb9", call_id.encode()
                    )
                )
                final = await peer.response(487)
                return str(final.status)
            gateway_id = next(c.id for c in app[SIP].calls.values() if c.dialog.call_id == call_id)
            async with aiohttp.ClientSession() as http:
                async with http.post(f"{url}/v1/realtime/calls/{gateway_id}/accept", json={}) as accepted:
                    assert accepted.status == 200, await accepted.text()
            final = await _final(peer)
            if final.status != 200:
                return str(final.status)
            tag = parse_name_addr(final.get("To") or "").tag
            answer = parse_offer(final.body.decode())
            ack = sip_samples.ack(port, tag, branch=f"{branch}ack", caller_port=peer.port)
            peer.send(ack.replace(b"d9c18dac2b108fb9", call_id.encode()))
            for sequence in range(25):  # 0.5 s of silence
                header = struct.pack("!BBHII", 0x80, 0, sequence, sequence * 160, 0x1234 + index)
                transport.sendto(header + PCMU_SILENCE, ("127.0.0.1", answer.port))
                await asyncio.sleep(0.02)
            assert rtp.received > 0  # the gateway's RTP came back to where ours came from
            if ending == "bye":
                bye = sip_samples.in_dialog(
                    "BYE", port, tag, caller_port=peer.port, call_id=call_id, branch=f"{branch}bye"
                )
                peer.send(bye)
                assert (await peer.response(200)).status == 200
            else:  # vanish: no more RTP; the gateway's BYE after the media timeout is never answered
                request = await peer.receive(within=15)
                while not isinstance(request, SipRequest):
                    request = await peer.receive(within=15)
                assert request.method == "BYE"
            return "200"
    finally:
        transport.close()


async def _past_trying(peer: SipSocket) -> SipResponse:
    while True:
        response = await peer.response(within=15)
        if response.status > 100:
            return response


async def _final(peer: SipSocket) -> SipResponse:
    while True:
        response = await peer.response(within=15)
        if response.status >= 200:
            return response


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
async def test_short_calls_leave_nothing_behind(models, gateway_config, webhook):
    config = sip_config(gateway_config, pool_size=2, media_timeout_s=1.0, sip_webhook_url=webhook.url)
    async with serve(config, models) as (url, app):
        await asyncio.sleep(0.5)
        fds, threads = _open_fds(), threading.active_count()
        rng = random.Random(3)
        endings = [rng.choice(["bye", "vanish", "cancel"]) for _ in range(12)]
        results = []
        for start in range(0, len(endings), 3):  # three at once: one more than the pool holds
            batch = endings[start : start + 3]
            results += await asyncio.gather(*(_call(url, app, start + i, e) for i, e in enumerate(batch)))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 30), app[SIP].calls
        assert set(results) <= {"200", "487", "503"} and results.count("200") >= 4, results
        assert await wait_until(lambda: not app[SIP].transactions.client, 40)  # lost BYEs: Timer F
        assert await wait_until(lambda: _open_fds() <= fds, 10), (_open_fds(), fds)
        assert threading.active_count() <= threads
