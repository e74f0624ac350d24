"""RTP (RFC 3550) and SRTP (RFC 3711) for a SIP call: the answered voice codec each way (G.711 at
8 kHz, Opus at 48 kHz), symmetric, with RFC 4733 key presses.

- **In**: each datagram on the call's RTP port is parsed (version 2, CSRCs, header extension and
  padding skipped); with SRTP it is first authenticated and decrypted
  (``gateway.transports.sip.srtp``: a packet that fails is dropped and counted, never decoded).
  The chosen voice payload type is decoded (its row of the codec table, ``gateway.media.codecs``:
  ``gateway.media.g711``, ``gateway.media.opus``), resampled to the VAD's rate
  (``gateway.media.resample``) and handed to ``on_audio``; ``telephone-event`` packets become key
  presses (``gateway.media.dtmf``); a payload over :data:`MAX_PAYLOAD_BYTES` (60 ms of G.711, one
  Ethernet datagram of Opus) is dropped; only accepted packets (and RTCP, with SRTP only
  authenticated SRTCP, from the latched address) count for the caller's presence (``packets``).
- **Symmetric RTP** (RFC 4961) with latching: replies go to where the caller's RTP comes from
  (behind NAT the SDP's address is private and useless), latched **once**, on the first valid
  (with SRTP: authenticated) packet whose source IP is one of ``trusted``
  (``gateway.transports.sip.trust``: by default the signalling source's only; None: any source).
  Afterwards datagrams from any other address (IP and port) or with another SSRC are dropped, so
  a third party cannot hijack the call's audio or inject key presses; only the caller's own
  re-INVITE moving its media (:meth:`RtpStream.move`) latches again.
- **Who is sent to**: nothing before the call is proven, by its latch or by the dialog's ACK
  (:meth:`RtpStream.acknowledged`: whoever sends it saw the 200 OK). After an ACK without a latch
  replies go to the SDP's address, but at most :data:`MAX_UNPROVEN_PACKETS` of them while that
  address has never sent RTP back (a forged ``c=`` names someone who never asked for a call); then
  sending stops until the caller's RTP latches, and the media timeout ends a call that stays
  silent; over the call, at most :data:`MAX_UNPROVEN_PACKETS_PER_CALL` go to unproven addresses
  (re-INVITEs moving the media included). So a forged INVITE makes the gateway send nobody a stream.
- **Out**: :meth:`RtpStream.play` reads a 20 ms paced track (``gateway.media.outbound``: 48 kHz),
  resamples to the codec's clock rate and sends one packet per 20 ms (RFC 3551: 160 samples of
  G.711; RFC 7587: 960 of Opus), with the marker bit on the first packet of each talk spurt,
  protected with the gateway's own key under SRTP. The gateway sends no RTCP.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Optional

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from gateway.media.codecs import SIP, STATIC_PAYLOAD_TYPES, Codec, PayloadDecoder, PayloadEncoder
from gateway.media.dtmf import KeyPress, KeyPressDetector
from gateway.media.resample import Resampler
from gateway.transports.sip.srtp import SrtpContext

log = logging.getLogger(__name__)

RTP_RATE = 8000  # G.711's clock, and telephone-event's unless the offer says otherwise
PACKET_MS = 20
# The longest payload taken, by voice encoding (a longer packet is dropped: no call sends one):
# 60 ms of G.711; for Opus, one Ethernet datagram (RFC 7587 speech packets are 20-200 bytes).
MAX_PAYLOAD_BYTES = {"PCMU": 480, "PCMA": 480, "opus": 1500}
# Packets sent to an address that has never sent RTP back (after the ACK, before any latch): 1 s.
MAX_UNPROVEN_PACKETS = 50
# ... and to such addresses over the whole call: a caller re-INVITEing its media to a new address
# every second (two ports of a victim, alternately) had a fresh 1 s of RTP sent to each, a stream
# of ~8.6 KB per re-INVITE to someone who never asked. A move to a phone that sends (as phones do)
# proves it within a packet or two, so the call's moves rarely spend more than a few.
MAX_UNPROVEN_PACKETS_PER_CALL = 3 * MAX_UNPROVEN_PACKETS


@dataclass(frozen=True)
class RtpPacket:
    """The fields of one RTP packet this gateway reads."""

    payload_type: int
    marker: bool
    sequence: int
    timestamp: int
    ssrc: int
    payload: bytes


def parse_rtp(data: bytes) -> Optional[RtpPacket]:
    """One RTP packet (RFC 3550 5.1), None for anything else (RTCP, STUN, a short or broken one)."""
    if len(data) < 12 or data[0] >> 6 != 2:
        return None
    first, second, sequence, timestamp, ssrc = struct.unpack("!BBHII", data[:12])
    payload_type = second & 0x7F
    if 72 <= payload_type <= 76:  # RTCP on the RTP port (RFC 5761 4)
        return None
    offset = 12 + 4 * (first & 0x0F)
    if first & 0x10:  # header extension
        if len(data) < offset + 4:
            return None
        offset += 4 + 4 * struct.unpack("!H", data[offset + 2 : offset + 4])[0]
    end = len(data)
    if first & 0x20:  # padding: its count is the last byte
        end -= data[-1]
    if offset > end:
        return None
    return RtpPacket(payload_type, bool(second & 0x80), sequence, timestamp, ssrc, data[offset:end])


def build_rtp(packet: RtpPacket) -> bytes:
    """The wire form of ``packet`` (no CSRC, no extension, no padding)."""
    second = (0x80 if packet.marker else 0) | packet.payload_type
    return struct.pack("!BBHII", 0x80, second, packet.sequence, packet.timestamp, packet.ssrc) + packet.payload


class _Endpoint(asyncio.DatagramProtocol):
    def __init__(self, stream: RtpStream) -> None:
        self.stream = stream

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.stream.received(data, (addr[0], addr[1]))

    def error_received(self, exc: Exception) -> None:
        log.debug("RTP socket error: %s", exc)


def _latch_sources(remote: tuple[str, int], trusted: Optional[Iterable[str]]) -> Optional[frozenset[str]]:
    """The IPs a latching packet may come from: ``trusted``, ``remote``'s IP when empty, any (None)."""
    return None if trusted is None else frozenset(trusted or (remote[0],))


class RtpStream:
    """The RTP of one call on one local UDP port (:meth:`open`). Set ``on_audio(samples,
    arrival)`` to get int16 mono at ``rate`` Hz (``time.monotonic()`` arrival), ``on_key(press)``
    for each key press, ``on_srtp_dropped(reason)`` for each SRTP packet dropped (reason
    ``authentication`` or ``replay``; all drop by default). ``packets`` counts the caller's packets
    received, ``sent`` the packets sent, ``withheld`` those not sent (nobody proven to send to,
    see the module), ``dropped`` the RTP packets refused (foreign source or SSRC, too long).
    ``trusted`` are the IP addresses the first (latching) packet may come from: empty, the SDP's
    address only; None, any address (``gateway.transports.sip.trust.latch_sources``). ``codec``
    is the row of the codec table of ``payload_type`` (None: the static payload type's row);
    ``telephone_event_rate`` the clock rate of ``telephone_event`` (Hz); ``srtp`` the call's SRTP
    sessions (None: plain RTP). ``sending`` False withholds every packet (the caller receives
    nothing: a hold), ``listening`` False drops the caller's audio before ``on_audio`` (key presses
    still count); ``removed`` True (the caller's offer removed the stream: port 0, RFC 3264 8.2)
    ignores whatever still comes, which then counts for nothing (no audio, key press or packet:
    the media timeout runs). Raises ValueError for a codec this leg cannot make RTP of."""

    def __init__(
        self,
        *,
        payload_type: int,
        telephone_event: Optional[int],
        remote: tuple[str, int],
        rate: int,
        trusted: Optional[Iterable[str]] = (),
        codec: Optional[Codec] = None,
        telephone_event_rate: int = RTP_RATE,
        srtp: Optional[SrtpContext] = None,
    ) -> None:
        codec = codec or STATIC_PAYLOAD_TYPES.get(payload_type)
        if (
            codec is None
            or codec.clock_rate is None
            or SIP not in codec.answered_on
            or codec.decoder is None
            or codec.encoder is None
        ):
            raise ValueError(f"payload type {payload_type}: not a voice codec of RTP here (PCMU, PCMA, opus)")
        self.clock_rate = codec.clock_rate
        self.packet_samples = codec.clock_rate * PACKET_MS // 1000
        # {voice payload type: (its decoder, its longest payload)}: the codec's, and while a
        # re-INVITE changes it, the one before (RFC 3264 8.3.2: packets in flight still come in it)
        self._voices: dict[int, tuple[PayloadDecoder, int]] = {}
        self.payload_type = payload_type
        self.codec = codec
        self._encode: PayloadEncoder = codec.encoder()
        self._voices[payload_type] = (codec.decoder(), MAX_PAYLOAD_BYTES.get(codec.encoding, 480))
        self.telephone_event = telephone_event
        self.telephone_event_rate = telephone_event_rate
        self.srtp = srtp
        self.on_srtp_dropped: Callable[[str], None] = lambda reason: None
        self.remote = remote
        self.latched = False
        self.trusted = _latch_sources(remote, trusted)
        self.sending = True
        self.listening = True
        self.removed = False
        self.packets = 0
        self.dropped = 0
        self._remote_ssrc: Optional[int] = None
        self.sent = 0
        self.withheld = 0
        self._acknowledged = False
        self._unproven = 0  # packets sent to ``remote`` before any latch
        self._unproven_in_call = 0  # packets sent to unproven addresses over the call (never reset)
        self._proven = asyncio.Event()  # set by the latch or the ACK: :meth:`play` may start
        self._foreign_logged = False
        self._srtp_logged = False
        self.on_audio: Callable[[np.ndarray, float], None] = lambda samples, arrival: None
        self.on_key: Callable[[KeyPress], None] = lambda press: None
        self._in = Resampler(rate)
        self._keys = KeyPressDetector()
        self._transport: Optional[asyncio.DatagramTransport] = None
        self._ssrc = secrets.randbits(32)
        self._sequence = secrets.randbits(16)
        self._timestamp = secrets.randbits(32)

    async def open(self, host: str, ports: Optional[tuple[int, int]] = None) -> int:
        """Bind a UDP port on ``host``: an even one of ``ports`` (first, last; tried in random
        order, RFC 3550 11), else an ephemeral one; returns it. Raises OSError when none is free."""
        loop = asyncio.get_running_loop()
        candidates = [0]
        if ports is not None:
            candidates = [port for port in range(ports[0], ports[1] + 1) if port % 2 == 0]
            random.shuffle(candidates)
        error: Optional[OSError] = None
        for port in candidates[:64]:
            try:
                transport, _ = await loop.create_datagram_endpoint(lambda: _Endpoint(self), local_addr=(host, port))
            except OSError as exc:
                error = exc
                continue
            self._transport = transport
            return int(transport.get_extra_info("sockname")[1])
        raise error or OSError("no RTP port free")

    def received(self, data: bytes, source: tuple[str, int]) -> None:
        """One datagram from ``source`` (see the module docstring)."""
        if self.removed:
            return
        packet = parse_rtp(data)
        if packet is None:
            if self.latched and source == self.remote and self._authentic_rtcp(data, source):
                self.packets += 1  # RTCP from the caller
            return
        if packet.payload_type != self.telephone_event and packet.payload_type not in self._voices:
            return
        if not self._admissible(packet, source):
            self.dropped += 1
            return
        if self.srtp is not None:
            clear = self.srtp.unprotect(data)
            packet = parse_rtp(clear) if clear is not None else None
            if packet is None:
                self._srtp_dropped(source)
                return
        voice = self._voices.get(packet.payload_type) if packet.payload_type != self.telephone_event else None
        if len(packet.payload) > (voice[1] if voice is not None else MAX_PAYLOAD_BYTES["PCMU"]):
            self.dropped += 1
            return
        self._latch(packet, source)
        self.packets += 1
        if voice is not None:
            if packet.payload:
                samples = voice[0](packet.payload)
                audio = self._in.resample_array(samples, self.clock_rate) if samples.size else samples
                if audio.size and self.listening:
                    self.on_audio(audio, time.monotonic())
        else:
            press = self._keys.packet(packet.ssrc, packet.timestamp, packet.payload, self.telephone_event_rate)
            if press is not None:
                self.on_key(press)

    def _admissible(self, packet: RtpPacket, source: tuple[str, int]) -> bool:
        """Whether ``packet`` may be the caller's (before any SRTP check): once latched, from the
        latched address and SSRC; before, from a trusted IP."""
        if self.latched:
            return source == self.remote and packet.ssrc == self._remote_ssrc
        if self.trusted is not None and source[0] not in self.trusted:
            if not self._foreign_logged:
                self._foreign_logged = True
                log.info("RTP from %s:%d dropped: not an address this call latches to (sip_rtp_latch)", *source)
            return False
        return True

    def _latch(self, packet: RtpPacket, source: tuple[str, int]) -> None:
        """Latch on the caller's first accepted packet (its address and SSRC)."""
        if self.latched:
            return
        if source != self.remote:
            log.info("RTP latched to %s:%d (SDP said %s:%d)", *source, *self.remote)
            self.remote = source
        self._remote_ssrc = packet.ssrc
        self.latched = True
        self._proven.set()

    def _authentic_rtcp(self, data: bytes, source: tuple[str, int]) -> bool:
        """Whether an RTCP datagram of the latched caller counts: with SRTP, only once it authenticates."""
        if self.srtp is None:
            return True
        if self.srtp.unprotect_rtcp(data) is not None:
            return True
        self._srtp_dropped(source)
        return False

    def _srtp_dropped(self, source: tuple[str, int]) -> None:
        """An SRTP or SRTCP packet failed authentication or the replay check: dropped, counted,
        logged once per call (never the packet nor the key)."""
        assert self.srtp is not None
        reason = self.srtp.last_drop
        self.on_srtp_dropped(reason)
        if reason == "authentication" and not self._srtp_logged:
            self._srtp_logged = True
            log.info("SRTP from %s:%d failed authentication: dropped (a wrong key, or not the caller's)", *source)

    def use_codec(self, payload_type: int, codec: Codec) -> None:
        """The caller's re-INVITE changed the voice codec (RFC 3264 8.3.2: the answerer sends in the
        offer's format from then on): send ``codec`` as ``payload_type`` from the next packet on,
        and decode it as it comes; the codec before is still decoded (packets in flight) until the
        next change. Raises ValueError for a codec of another clock rate (the paced playout and the
        packet size are the call's) or one this leg cannot make RTP of."""
        if codec.clock_rate != self.clock_rate or codec.decoder is None or codec.encoder is None:
            raise ValueError(f"{codec.encoding}/{codec.clock_rate}: not a codec of this call's {self.clock_rate} Hz")
        if (payload_type, codec) == (self.payload_type, self.codec):
            return
        log.info("RTP codec: %s (%d) -> %s (%d)", self.codec.encoding, self.payload_type, codec.encoding, payload_type)
        previous = self._voices[self.payload_type]
        self._voices = {self.payload_type: previous}
        self._voices[payload_type] = (codec.decoder(), MAX_PAYLOAD_BYTES.get(codec.encoding, 480))
        self.payload_type, self.codec, self._encode = payload_type, codec, codec.encoder()

    def move(self, remote: tuple[str, int], trusted: Optional[Iterable[str]] = ()) -> None:
        """The caller's re-INVITE moved its media to ``remote`` (a PBX handing the media to the
        phone, a bridge after a transfer): replies go there, and the stream latches again on the
        first packet from one of ``trusted`` (as at the start: empty, ``remote``'s IP; None: any);
        the new address gets :data:`MAX_UNPROVEN_PACKETS` before it has sent back, within what is
        left of the call's :data:`MAX_UNPROVEN_PACKETS_PER_CALL`. Logged when the address changed
        (a stream brought back to the same one latches anew all the same)."""
        if remote != self.remote:  # a stream brought back or added at the same address has not moved
            log.info("RTP moved by a re-INVITE: %s:%d -> %s:%d", *self.remote, *remote)
        self.remote = remote
        self.trusted = _latch_sources(remote, trusted)
        self.latched = False
        self._remote_ssrc = None
        self._unproven = 0
        self._foreign_logged = False

    def acknowledged(self) -> None:
        """The call's 200 OK was acknowledged (its ACK came): replies may go to the SDP's address
        before any latch, :data:`MAX_UNPROVEN_PACKETS` at most (see the module)."""
        self._acknowledged = True
        self._proven.set()

    def send_samples(self, samples: np.ndarray, marker: bool) -> None:
        """Send :attr:`packet_samples` int16 samples at the codec's clock rate (20 ms) as one
        packet, SRTP-protected under SRTP (withheld while nobody is proven to send to, or not
        :attr:`sending`: the timestamp still advances, RFC 3550 5.1)."""
        if self._transport is None or self._transport.is_closing():
            return
        if not self.sending:
            self.withheld += 1
            self._timestamp = (self._timestamp + self.packet_samples) & 0xFFFFFFFF
            return
        if not self.latched:
            if (
                not self._acknowledged
                or self._unproven >= MAX_UNPROVEN_PACKETS
                or self._unproven_in_call >= MAX_UNPROVEN_PACKETS_PER_CALL
            ):
                self.withheld += 1
                self._timestamp = (self._timestamp + self.packet_samples) & 0xFFFFFFFF
                return
            self._unproven += 1
            self._unproven_in_call += 1
            if self._unproven == MAX_UNPROVEN_PACKETS:
                log.info(
                    "no RTP from %s:%d after %d packets: sending stops until it speaks", *self.remote, self._unproven
                )
        payload = self._encode(samples)
        packet = RtpPacket(self.payload_type, marker, self._sequence, self._timestamp, self._ssrc, payload)
        data = build_rtp(packet)
        self._transport.sendto(data if self.srtp is None else self.srtp.protect(data), self.remote)
        self._sequence = (self._sequence + 1) & 0xFFFF
        self._timestamp = (self._timestamp + self.packet_samples) & 0xFFFFFFFF
        self.sent += 1

    async def play(self, track: MediaStreamTrack, source_rate: int) -> None:
        """Send ``track`` (paced 20 ms frames of int16 mono at ``source_rate`` Hz) until it ends
        or this is cancelled: each frame resampled to the codec's clock rate, sent in 20 ms
        packets. Nothing is read before the call is proven (its latch or ACK): the reply audio
        waits for it."""
        await self._proven.wait()
        out = Resampler(self.clock_rate)
        size = self.packet_samples
        pending = np.zeros(0, np.int16)
        talking = False
        try:
            while True:
                frame = await track.recv()
                assert isinstance(frame, av.AudioFrame)
                carried = bool(getattr(track, "carried_audio", True))
                samples = frame.to_ndarray().reshape(-1).astype(np.int16, copy=False)
                pending = np.concatenate([pending, out.resample_array(samples, source_rate)])
                while pending.size >= size:
                    self.send_samples(pending[:size], marker=carried and not talking)
                    pending = pending[size:]
                talking = carried
        except MediaStreamError:
            return

    def close(self) -> None:
        """Close the port (and say how many SRTP packets were dropped, if any)."""
        if self._transport is None or self._transport.is_closing():
            return
        self._transport.close()
        if self.srtp is not None and (self.srtp.rejected or self.srtp.replayed):
            log.info(
                "SRTP packets dropped in this call: %d failed authentication, %d replayed",
                self.srtp.rejected,
                self.srtp.replayed,
            )
