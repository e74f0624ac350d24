"""Callers that behave like SIP bridges and non-browser WebRTC stacks, built on aiortc with the few
changes each needs: an RSA DTLS certificate, silence suppression (no RTP while not talking), RFC
4733 ``telephone-event`` packets, a peer that goes quiet altogether. Test helpers, not doubles:
each is a real aiortc peer talking to the real gateway over loopback."""

from __future__ import annotations

import asyncio
import re
import struct
from typing import Any, Optional

from aiortc import RTCPeerConnection
from aiortc.rtcdtlstransport import RTCCertificate, RTCDtlsTransport, generate_certificate
from aiortc.rtp import RtpPacket
from cryptography.hazmat.primitives.asymmetric import rsa
from OpenSSL import SSL

from gateway.client import MicrophoneTrack, RealtimeClient

# What an RSA peer (GStreamer's DTLS agent, SIP bridges) offers as DTLS client or server: ECDHE with
# RSA authentication first, ECDSA too (for a server with an ECDSA certificate).
_RSA_PEER_CIPHERS = (
    b"ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA:"
    b"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-SHA"
)


class RsaCertificate(RTCCertificate):
    """An aiortc DTLS certificate with a 2048-bit RSA key, as GStreamer's ``dtlsagent`` makes."""

    @classmethod
    def generate(cls) -> RsaCertificate:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return cls(key=key, cert=generate_certificate(key))  # type: ignore[arg-type]

    def _create_ssl_context(self, srtp_profiles: list[Any]) -> SSL.Context:
        ctx = super()._create_ssl_context(srtp_profiles)
        ctx.set_cipher_list(_RSA_PEER_CIPHERS)
        return ctx


def use_rsa_certificate(pc: RTCPeerConnection) -> None:
    """Make ``pc`` (before any transceiver or channel is added) use an RSA DTLS certificate."""
    pc._RTCPeerConnection__certificates = [RsaCertificate.generate()]  # type: ignore[attr-defined]


class SuppressingMicrophone(MicrophoneTrack):
    """A microphone with silence suppression (SIP VAD/CN, Opus DTX taken to its end): RTP is sent
    only while there is speech queued; in between, ``recv`` waits and the sender sends nothing
    (its RTCP reports go on, as a real bridge's do)."""

    def __init__(self) -> None:
        super().__init__()
        self._wake = asyncio.Event()
        self.suppressed_since: Optional[float] = None

    def say(self, samples: Any) -> None:
        super().say(samples)
        self._wake.set()

    async def recv(self) -> Any:
        while not self.speaking and self.readyState == "live":
            self._wake.clear()
            self._start = None  # restart the pacing clock when speech resumes
            await self._wake.wait()
        return await super().recv()


def dtls_transport(client: RealtimeClient) -> RTCDtlsTransport:
    """The client's (bundled) DTLS transport."""
    return client.pc.getTransceivers()[0].sender.transport


def go_quiet(client: RealtimeClient) -> None:
    """From now on the client sends nothing at all (no RTP, no RTCP, no data channel): a frozen or
    cut-off peer. It still receives."""
    transport = dtls_transport(client)

    async def drop(data: bytes) -> None:
        return None

    transport._send_rtp = drop  # type: ignore[method-assign]
    transport._send_data = drop  # type: ignore[method-assign]


def add_telephone_event(offer_sdp: str, payload_type: int = 101, clock_rate: int = 8000) -> str:
    """An aiortc offer with ``telephone-event`` added to its audio m-line (aiortc never offers it)."""
    offer_sdp = re.sub(r"^(m=audio \S+ \S+ [^\r\n]*)", rf"\1 {payload_type}", offer_sdp, count=1, flags=re.M)
    return re.sub(
        r"^(a=rtpmap:\d+ [^\r\n]*)(\r?\n)",
        rf"\1\2a=rtpmap:{payload_type} telephone-event/{clock_rate}"
        rf"\2a=fmtp:{payload_type} 0-15\2",
        offer_sdp,
        count=1,
        flags=re.M,
    )


class KeyPad:
    """Sends RFC 4733 key presses on a client's audio m-line, as a SIP bridge relays them: for each
    digit a start packet (marker bit), updates every 50 ms, then three end packets, all with the
    timestamp of the key press. They go out on an SSRC of their own (``ssrc``): aiortc's sender
    keeps the sequence numbers of the voice SSRC to itself, and SRTP refuses reused ones. (The
    GStreamer test sends them on the voice SSRC, as ``rtpdtmfmux`` does.)"""

    DIGITS = "0123456789*#ABCD"

    def __init__(self, client: RealtimeClient, payload_type: int = 101, clock_rate: int = 8000) -> None:
        self._client = client
        self._pt = payload_type
        self._rate = clock_rate
        self._sequence = 20000
        self._timestamp = 160000
        self.ssrc = 0x5EED0101
        self.packets_sent = 0

    async def _send(self, event: int, end: bool, duration: int, marker: bool, timestamp: int) -> None:
        sender = self._client.pc.getTransceivers()[0].sender
        packet = RtpPacket(
            payload_type=self._pt,
            marker=int(marker),
            sequence_number=self._sequence & 0xFFFF,
            timestamp=timestamp,
            ssrc=self.ssrc,
            payload=struct.pack("!BBH", event, (0x80 if end else 0) | 10, duration),
        )
        self._sequence += 1
        self.packets_sent += 1
        await sender.transport._send_rtp(packet.serialize())

    async def press(self, digits: str, hold_ms: int = 120, gap_ms: int = 150) -> None:
        """Press each of ``digits`` for ``hold_ms``, ``gap_ms`` apart."""
        for digit in digits:
            event = self.DIGITS.index(digit)
            timestamp = self._timestamp
            step = self._rate * 50 // 1000
            await self._send(event, False, step, True, timestamp)
            for held in range(2 * step, self._rate * hold_ms // 1000, step):
                await asyncio.sleep(0.05)
                await self._send(event, False, held, False, timestamp)
            duration = self._rate * hold_ms // 1000
            for _ in range(3):  # the end packet, sent three times (RFC 4733 2.5.1.4)
                await self._send(event, True, duration, False, timestamp)
            self._timestamp += duration + self._rate * gap_ms // 1000
            await asyncio.sleep(gap_ms / 1000)
