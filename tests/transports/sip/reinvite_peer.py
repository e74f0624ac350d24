"""The caller's side of the re-INVITE tests, from raw sockets on loopback: an RTP port that keeps
what the gateway sends, the caller's RTP to the gateway (:class:`CallerRtp`), a call made and
acknowledged (:func:`answered_call`), a re-INVITE sent and its final response (its 2xx
acknowledged), and the ``o=`` line of an answer."""

from __future__ import annotations

import asyncio
import re
from typing import Optional

import numpy as np
from pylibsrtp import Session

from gateway.media.g711 import encode_mulaw
from gateway.transports.sip.message import SipResponse, parse_name_addr
from gateway.transports.sip.rtp import RtpPacket, build_rtp
from tests.transports.sip import sip_samples
from tests.transports.sip.sip_socket import SipSocket

TONE = encode_mulaw((np.sin(np.arange(160) / 3) * 8000).astype(np.int16))  # 20 ms of PCMU


class MediaPort(asyncio.DatagramProtocol):
    """A caller's RTP port: keeps what the gateway sends."""

    def __init__(self) -> None:
        self.datagrams: list[bytes] = []

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.datagrams.append(data)


class CallerRtp:
    """The caller's RTP to the gateway's RTP port on 127.0.0.1: :meth:`send` sends 20 ms packets
    (PCMU :data:`TONE` by default), numbered on over the whole call (sequence and timestamp)
    whichever socket, SSRC, payload type or SRTP session sends them: a test moves the media,
    changes the key, the SSRC or the codec."""

    def __init__(self, gateway_port: int) -> None:
        self.gateway_port = gateway_port
        self.sequence = 0

    def send(
        self,
        socket: asyncio.DatagramTransport,
        count: int,
        *,
        ssrc: int = 7,
        payload_type: int = 0,
        payload: bytes = TONE,
        srtp: Optional[Session] = None,
    ) -> None:
        """``count`` packets from ``socket``, protected by ``srtp`` when given."""
        for _ in range(count):
            self.sequence += 1
            packet = RtpPacket(payload_type, False, self.sequence & 0xFFFF, 160 * self.sequence, ssrc, payload)
            data = build_rtp(packet)
            socket.sendto(data if srtp is None else srtp.protect(data), ("127.0.0.1", self.gateway_port))


async def media_port() -> tuple[asyncio.DatagramTransport, MediaPort, int]:
    """A :class:`MediaPort` on 127.0.0.1: its transport, itself and its port number."""
    transport, media = await asyncio.get_running_loop().create_datagram_endpoint(MediaPort, local_addr=("127.0.0.1", 0))
    return transport, media, transport.get_extra_info("sockname")[1]


async def answered_call(
    caller: SipSocket, port: int, rtp_port: int, sdp: str = sip_samples.BARESIP_SDP
) -> tuple[SipResponse, str, int]:
    """A call made with baresip's INVITE (offer ``sdp``, a template) and its 200 OK acknowledged:
    the 200, its To tag, the gateway's RTP port."""
    caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=rtp_port, sdp=sdp))
    ok = await caller.response(200, within=15)
    gateway_port = int(re.search(r"m=audio (\d+) ", ok.body.decode()).group(1))  # type: ignore[union-attr]
    tag = parse_name_addr(ok.get("To") or "").tag
    caller.send(sip_samples.ack(port, tag, branch="z9hG4bKanswerack", caller_port=caller.port))
    return ok, tag, gateway_port


def reinvite(port: int, tag: str, caller_port: int, sdp: str, rtp_port: int, cseq: int) -> bytes:
    """The caller's re-INVITE of CSeq ``cseq`` with the SDP template ``sdp`` filled in."""
    body = sdp.format(rtp_host="127.0.0.1", rtp_port=rtp_port)
    return sip_samples.in_dialog(
        "INVITE", port, tag, caller_port=caller_port, branch=f"z9hG4bKre{cseq}", cseq=cseq,
        body=body, content_type="application/sdp",
    )  # fmt: skip


async def offered(
    caller: SipSocket, port: int, tag: str, sdp: str, rtp_port: int, cseq: int, *, ack: bool = True
) -> SipResponse:
    """Send a re-INVITE; its final response (others skipped: a 2xx of an earlier re-INVITE may
    come again), its 2xx ACKed unless ``ack`` is False."""
    caller.send(reinvite(port, tag, caller.port, sdp, rtp_port, cseq))
    while True:
        response = await caller.response(within=10)
        if response.get("CSeq") == f"{cseq} INVITE" and response.status >= 200:
            break
    if ack and 200 <= response.status < 300:
        caller.send(sip_samples.ack(port, tag, branch=f"z9hG4bKreack{cseq}", caller_port=caller.port, cseq=cseq))
    return response


def origin(sdp: str) -> tuple[str, int]:
    """The session id and version of an answer's ``o=`` line."""
    found = re.search(r"o=voice-gateway (\d+) (\d+) ", sdp)
    assert found, sdp
    return found.group(1), int(found.group(2))
