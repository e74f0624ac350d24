"""SDES-SRTP against a real gateway (real pool and models, auto-accept) from raw sockets on
loopback: an offer whose key is missing or unusable gets 488 and claims no unit; in an answered
SRTP call, packets under the wrong key or with a bad authentication tag are dropped and counted
(``vg_sip_srtp_dropped_total``), never reach the caller's audio nor latch the call, while the
caller's own packets do; what the gateway sends decrypts with the key of its answer."""

from __future__ import annotations

import asyncio
import base64
import re

import numpy as np
from pylibsrtp import Policy, Session

from gateway.media.g711 import encode_mulaw
from gateway.server.app_keys import METRICS, SIP
from gateway.transports.sip.message import SipResponse, parse_name_addr
from gateway.transports.sip.rtp import RtpPacket, build_rtp, parse_rtp
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket

OFFERED_KEY = sip_samples.OFFERED_KEY


class _Media(asyncio.DatagramProtocol):
    """The caller's RTP port: keeps what the gateway sends."""

    def __init__(self) -> None:
        self.datagrams: list[bytes] = []

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.datagrams.append(data)


def _dropped(app, reason: str) -> float:
    return app[METRICS].registry.get_sample_value("vg_sip_srtp_dropped_total", {"reason": reason}) or 0.0


async def test_a_missing_or_unusable_key_is_488_and_claims_no_unit(models, gateway_config):
    config = sip_config(gateway_config)
    srtp = sip_samples.BARESIP_SRTP_SDP
    unusable = {
        "no key": srtp.replace(f"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{OFFERED_KEY}\r\n", ""),
        "a key cut short": srtp.replace(OFFERED_KEY, OFFERED_KEY[:-8]),
        "no base64": srtp.replace(OFFERED_KEY, "*" + OFFERED_KEY[1:]),
        "another suite": srtp.replace("AES_CM_128_HMAC_SHA1_80", "F8_128_HMAC_SHA1_80"),
    }
    async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
        for number, (case, sdp) in enumerate(unusable.items()):
            caller.send(
                sip_samples.invite(
                    config.sip_port,
                    caller_port=caller.port,
                    sdp=sdp,
                    call_id=f"bad-key-{number}",
                    branch=f"z9hG4bKk{number}",
                )
            )
            refused = await caller.response(488)
            assert "SRTP (RTP/SAVP)" in (refused.get("Warning") or ""), (case, refused.get("Warning"))
            assert OFFERED_KEY[:12] not in (refused.get("Warning") or "")
            assert not app[SIP].calls and app_idle(app), case
        answered = app[METRICS].registry.get_sample_value("vg_calls_total", {"result": "answered"})
        assert not answered  # the door never opened a session


async def test_srtp_that_fails_authentication_is_dropped_counted_and_never_heard(models, gateway_config):
    config = sip_config(gateway_config, media_timeout_s=30.0)
    loop = asyncio.get_running_loop()
    media_socket, media = await loop.create_datagram_endpoint(_Media, local_addr=("127.0.0.1", 0))
    rtp_port = media_socket.get_extra_info("sockname")[1]
    caller_key = Session(Policy(base64.b64decode(OFFERED_KEY), Policy.SSRC_ANY_OUTBOUND))
    wrong_key = Session(Policy(bytes(30), Policy.SSRC_ANY_OUTBOUND))
    tone = encode_mulaw((np.sin(np.arange(160) / 3) * 8000).astype(np.int16))
    sequence = 0

    def packet(session: Session) -> bytes:
        nonlocal sequence
        sequence += 1
        return session.protect(build_rtp(RtpPacket(0, False, sequence, 160 * sequence, 99, tone)))

    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            invite = sip_samples.invite(
                port, caller_port=caller.port, rtp_port=rtp_port, sdp=sip_samples.BARESIP_SRTP_SDP
            )
            caller.send(invite)
            ok = await caller.response(200, within=15)
            assert isinstance(ok, SipResponse)
            answer = ok.body.decode()
            gateway_port = int(re.search(r"m=audio (\d+) RTP/SAVP 0 101", answer).group(1))  # type: ignore[union-attr]
            gateway_key = re.search(r"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:(\S+)", answer).group(1)  # type: ignore[union-attr]
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKsrtpack", caller_port=caller.port))
            call = next(iter(app[SIP].calls.values()))

            for _ in range(25):  # the wrong key: as a forger or a mis-keyed trunk sends
                media_socket.sendto(packet(wrong_key), ("127.0.0.1", gateway_port))
            assert await wait_until(lambda: _dropped(app, "authentication") == 25, 10)
            assert call.rtp.packets == 0 and not call.rtp.latched  # never heard, never latched
            for _ in range(25):
                media_socket.sendto(packet(caller_key), ("127.0.0.1", gateway_port))
            assert await wait_until(lambda: call.rtp.packets == 25, 10)
            assert call.rtp.latched and call.rtp.remote == ("127.0.0.1", rtp_port)
            tampered = bytearray(packet(caller_key))
            tampered[-3] ^= 0x10  # a bit of the authentication tag
            media_socket.sendto(bytes(tampered), ("127.0.0.1", gateway_port))
            assert await wait_until(lambda: _dropped(app, "authentication") == 26, 10)
            assert call.rtp.packets == 25

            assert await wait_until(lambda: len(media.datagrams) >= 10, 10)  # the gateway's stream (silence)
            inbound = Session(Policy(base64.b64decode(gateway_key), Policy.SSRC_ANY_INBOUND))
            sent = parse_rtp(inbound.unprotect(media.datagrams[0]))
            assert sent is not None and sent.payload_type == 0 and len(sent.payload) == 160

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        media_socket.close()
