"""The SIP call's media pieces without a call: the SDP answer to real offers, RTP packets (CSRCs,
extension, padding, RTCP refused), symmetric latching and RFC 4733 key presses on a real UDP port,
RTP sent only to a caller proven by its latch or its ACK,
the RTP port range, and Standard Webhooks signing (the specification's published example)."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import numpy as np
import pytest

from gateway.media.dtmf import KeyPressDetector
from gateway.media.g711 import encode_mulaw
from gateway.transports.sip import rtp
from gateway.transports.sip.rtp import RTP_RATE, RtpPacket, RtpStream, build_rtp, parse_rtp
from gateway.transports.sip.sdp import SdpError, build_answer, parse_offer, removed_stream
from gateway.transports.sip.settings import rtp_port_range
from gateway.transports.sip.user_agent import resolve
from gateway.transports.sip.webhook import sign, signing_key
from tests.helpers import wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.sip_samples import BARESIP_SDP

FREESWITCH_WEBRTC = (
    Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "sdp" / "aiortc_audio_freeswitch.sdp"
)


def test_baresip_offer_is_answered_pcmu_with_telephone_event():
    offer = parse_offer(BARESIP_SDP.format(rtp_host="127.0.0.1", rtp_port=20004))
    assert (offer.address, offer.port, offer.payload_type, offer.codec) == ("127.0.0.1", 20004, 0, "PCMU")
    assert offer.telephone_event == 101 and offer.direction == "sendrecv"
    answer = build_answer(offer, "203.0.113.5", 40000)
    assert "c=IN IP4 203.0.113.5" in answer and "m=audio 40000 RTP/AVP 0 101" in answer
    assert "a=rtpmap:101 telephone-event/8000" in answer and "a=sendrecv" in answer
    again = parse_offer(answer)  # the answer reads as SDP itself
    assert (again.port, again.payload_type, again.telephone_event) == (40000, 0, 101)


def test_pcma_first_static_types_without_rtpmap_and_refusals():
    pcma = "v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 5004 RTP/AVP 8 0\r\na=sendonly\r\n"
    offer = parse_offer(pcma)
    assert (offer.codec, offer.telephone_event) == ("PCMA", None)
    assert "a=recvonly" in build_answer(offer, "127.0.0.1", 4000)
    with pytest.raises(SdpError, match=r"RTP/SAVP.*no a=crypto"):
        parse_offer(pcma.replace("RTP/AVP", "RTP/SAVP"))
    with pytest.raises(SdpError, match="none of opus, PCMU, PCMA"):
        parse_offer("v=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 5004 RTP/AVP 9\r\na=rtpmap:9 G722/8000\r\n")
    with pytest.raises(SdpError):
        parse_offer("v=0\r\nm=audio 5004 RTP/AVP 0\r\n")  # no connection address
    if FREESWITCH_WEBRTC.exists():  # a SIP bridge's WebRTC offer belongs at POST /v1/realtime/calls
        with pytest.raises(SdpError, match="UDP/TLS/RTP/SAVPF"):
            parse_offer(FREESWITCH_WEBRTC.read_text())


def test_a_direction_given_for_the_session_is_the_streams_and_is_mirrored():
    # RFC 8866 6.7: a session-level direction applies to each m-section without its own. A phone
    # that offers to only send (a=sendonly above the m= line) was answered sendrecv.
    offer = parse_offer("v=0\r\nc=IN IP4 10.0.0.1\r\na=sendonly\r\nm=audio 5004 RTP/AVP 0\r\n")
    assert offer.direction == "sendonly" and "a=recvonly" in build_answer(offer, "127.0.0.1", 4000)
    own = parse_offer("v=0\r\nc=IN IP4 10.0.0.1\r\na=sendonly\r\nm=audio 5004 RTP/AVP 0\r\na=inactive\r\n")
    assert own.direction == "inactive"


def test_a_port_0_offer_removes_the_stream_and_is_answered_with_port_0():
    """RFC 3264 8.2: a stream offered with port 0 is removed (not held), and the answer's m-line
    has port 0 too. Before, port 0 was read as a hold and answered with the gateway's own port,
    promising media on a stream the caller had just removed. The removal may list any one format
    and drop the other attributes (here no a=crypto under RTP/SAVP); the answer keeps the codec
    alone, without a key."""
    sdp = sip_samples.BARESIP_SRTP_SDP.format(rtp_host="127.0.0.1", rtp_port=20004)
    offer = parse_offer(sdp)
    assert not removed_stream(sdp, offer.slot)
    removal = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 0 RTP/SAVP 8\r\n"
    assert removed_stream(removal, offer.slot)
    assert removed_stream(sdp.replace("m=audio 20004", "m=audio 0"), offer.slot)
    assert not removed_stream(sdp.replace("c=IN IP4 127.0.0.1", "c=IN IP4 0.0.0.0"), offer.slot)  # RFC 2543's hold
    video_first = "v=0\r\nc=IN IP4 10.0.0.1\r\nm=video 0 RTP/AVP 96\r\nm=audio 5004 RTP/AVP 0\r\n"
    assert not removed_stream(video_first, 1)  # the call's stream (its m-line position) is the one that counts
    answer = build_answer(offer, "127.0.0.1", 40000, removed=True)
    assert "m=audio 0 RTP/SAVP 0\r\n" in answer and "a=rtpmap:0 PCMU/8000" in answer
    assert "40000" not in answer and "a=crypto" not in answer and "telephone-event" not in answer
    assert removed_stream(answer, offer.slot)


def test_a_removed_stream_takes_nothing_from_what_still_comes():
    # After a port-0 offer no media flows (RFC 3264 8.2): a peer that sends on must neither be
    # heard nor keep the call alive (packets counted are what the media timeout watches).
    stream = RtpStream(payload_type=0, telephone_event=101, remote=("127.0.0.1", 4000), rate=8000)
    heard: list[np.ndarray] = []
    keys: list[str] = []
    stream.on_audio = lambda samples, arrival: heard.append(samples)
    stream.on_key = lambda press: keys.append(press.digit)
    audio = build_rtp(RtpPacket(0, False, 1, 0, 7, encode_mulaw(np.zeros(160, np.int16))))
    stream.received(audio, ("127.0.0.1", 4000))
    assert stream.packets == 1 and len(heard) == 1
    stream.removed = True
    stream.received(
        build_rtp(RtpPacket(0, False, 2, 160, 7, encode_mulaw(np.zeros(160, np.int16)))), ("127.0.0.1", 4000)
    )
    stream.received(build_rtp(RtpPacket(101, True, 3, 320, 7, struct.pack("!BBH", 5, 0x80, 480))), ("127.0.0.1", 4000))
    stream.received(b"\x80\xc8" + b"\x00" * 26, ("127.0.0.1", 4000))  # RTCP SR
    assert stream.packets == 1 and len(heard) == 1 and keys == []


def test_rtp_packets_parse_with_csrcs_extension_and_padding():
    packet = RtpPacket(0, True, 65535, 2**32 - 1, 0xDEADBEEF, b"\x01\x02\x03")
    assert parse_rtp(build_rtp(packet)) == packet
    header = struct.pack("!BBHII", 0x80 | 0x20 | 0x10 | 2, 8, 7, 160, 42)
    csrcs = b"\x00" * 8
    extension = struct.pack("!HH", 0xBEDE, 1) + b"\x00" * 4
    data = header + csrcs + extension + b"\xaa\xbb" + b"\x00\x00\x03"  # 3 bytes of padding
    parsed = parse_rtp(data)
    assert parsed is not None and parsed.payload == b"\xaa\xbb" and parsed.payload_type == 8
    assert parse_rtp(struct.pack("!BBHII", 0x80, 200, 1, 0, 1)) is None  # RTCP SR on the RTP port
    assert parse_rtp(b"\x80\x00") is None and parse_rtp(b"\x00" * 12) is None
    assert parse_rtp(header[:1] + bytes([0]) + header[2:]) is None  # extension beyond the end


async def test_rtp_latches_to_the_source_and_reports_key_presses_once():
    stream = RtpStream(
        payload_type=0, telephone_event=101, remote=("192.0.2.99", 9), rate=16000, trusted=("127.0.0.1",)
    )
    heard: list[np.ndarray] = []
    keys: list[str] = []
    stream.on_audio = lambda samples, arrival: heard.append(samples)
    stream.on_key = lambda press: keys.append(press.digit)
    port = await stream.open("127.0.0.1")
    loop = asyncio.get_running_loop()
    sender, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0))
    back = sender.get_extra_info("sockname")
    try:
        tone = (np.sin(np.arange(160) / 3) * 8000).astype(np.int16)
        for sequence in range(5):
            sender.sendto(
                build_rtp(RtpPacket(0, False, sequence, sequence * 160, 7, encode_mulaw(tone))), ("127.0.0.1", port)
            )
        for repeat, (end, duration) in enumerate([(False, 160), (False, 320), (True, 480), (True, 480), (True, 480)]):
            payload = struct.pack("!BBH", 5, 0x80 if end else 0, duration)
            sender.sendto(build_rtp(RtpPacket(101, repeat == 0, 10 + repeat, 4000, 7, payload)), ("127.0.0.1", port))
        for _ in range(100):
            if stream.packets >= 10:
                break
            await asyncio.sleep(0.01)
        assert stream.remote == ("127.0.0.1", back[1]) and stream.latched
        assert keys == ["5"]  # one key press however many packets carry it
        assert sum(chunk.size for chunk in heard) > 5 * 160  # 8 kHz in, 16 kHz out
        stream.send_samples(np.zeros(160, np.int16), marker=True)
        assert stream.sent == 1
    finally:
        sender.close()
        stream.close()


@pytest.mark.parametrize("media", ["m=audio \u00b2 RTP/AVP 0", "m=audio 4000 RTP/AVP \u00b2 0\r\na=ptime:\u00b2"])
def test_sdp_with_non_ascii_digits_is_an_sdp_error_or_ignored(media: str):
    offer = f"v=0\r\nc=IN IP4 192.0.2.1\r\n{media}\r\na=rtpmap:\u00b2 PCMU/8000\r\n"
    try:
        assert parse_offer(offer).payload_type == 0
    except SdpError:
        pass


def test_a_hostname_as_connection_address_is_refused():
    # sendto((hostname, port)) would resolve it on the event loop every 20 ms
    with pytest.raises(SdpError, match="not an IP address"):
        parse_offer("v=0\r\nc=IN IP4 media.example.invalid\r\nm=audio 4000 RTP/AVP 0\r\n")
    assert parse_offer("v=0\r\nc=IN IP6 2001:db8::1\r\nm=audio 4000 RTP/AVP 0\r\n").address == "2001:db8::1"


async def test_in_dialog_next_hops_are_resolved_off_the_loop():
    assert await resolve(("192.0.2.1", 5060)) == ("192.0.2.1", 5060)
    assert await resolve(("[2001:db8::1]", 5060)) == ("2001:db8::1", 5060)
    assert (await resolve(("localhost", 5062)))[1] == 5062
    with pytest.raises(OSError):
        await resolve(("no-such-host.invalid", 5060))


def test_rtp_latches_once_and_drops_other_sources_and_ssrcs():
    # A third party that knows the port must not take the call's audio or inject key presses.
    stream = RtpStream(
        payload_type=0, telephone_event=101, remote=("10.0.0.5", 4000), rate=8000, trusted=("198.51.100.7",)
    )
    heard: list[np.ndarray] = []
    keys: list[str] = []
    stream.on_audio = lambda samples, arrival: heard.append(samples)
    stream.on_key = lambda press: keys.append(press.digit)
    audio = encode_mulaw(np.zeros(160, np.int16))
    key = struct.pack("!BBH", 5, 0x80, 480)
    stream.received(build_rtp(RtpPacket(0, False, 1, 0, 9, audio)), ("203.0.113.66", 5000))  # untrusted IP first
    assert not stream.latched and stream.remote == ("10.0.0.5", 4000) and stream.packets == 0
    stream.received(build_rtp(RtpPacket(0, False, 1, 0, 7, audio)), ("198.51.100.7", 30000))  # the caller, via NAT
    assert stream.latched and stream.remote == ("198.51.100.7", 30000) and stream.packets == 1 and len(heard) == 1
    for source, ssrc in [(("203.0.113.66", 5000), 7), (("198.51.100.7", 30002), 7), (("198.51.100.7", 30000), 8)]:
        stream.received(build_rtp(RtpPacket(0, False, 2, 160, ssrc, audio)), source)
        stream.received(build_rtp(RtpPacket(101, True, 3, 320, ssrc, key)), source)
        stream.received(b"\x80\xc8" + b"\x00" * 26, source)  # RTCP SR
    assert stream.remote == ("198.51.100.7", 30000) and stream.dropped == 7
    assert stream.packets == 2 and len(heard) == 1 and keys == []  # the RTCP from the latched address counts
    stream.received(build_rtp(RtpPacket(101, True, 3, 320, 7, key)), ("198.51.100.7", 30000))
    assert keys == ["5"]


def test_oversized_rtp_payloads_are_dropped_and_key_state_stays_bounded():
    stream = RtpStream(payload_type=8, telephone_event=101, remote=("192.0.2.1", 4000), rate=8000)
    heard: list[np.ndarray] = []
    stream.on_audio = lambda samples, arrival: heard.append(samples)
    stream.received(build_rtp(RtpPacket(8, False, 1, 0, 7, b"\xd5" * 481)), ("192.0.2.1", 4000))  # > 60 ms
    assert heard == [] and stream.dropped == 1 and not stream.latched
    stream.received(build_rtp(RtpPacket(8, False, 2, 160, 7, b"\xd5" * 480)), ("192.0.2.1", 4000))
    assert len(heard) == 1 and heard[0].size == 480
    detector = KeyPressDetector()  # one per call; a flood of SSRCs must not grow it for ever
    for ssrc in range(1000):
        detector.packet(ssrc, 0, struct.pack("!BBH", 5, 0, 160), RTP_RATE)
    assert len(detector._recent) <= 8


async def test_rtp_port_range_gives_even_ports_inside_it():
    assert rtp_port_range("") is None
    assert rtp_port_range("10000-10010") == (10000, 10010)
    for bad in ("10000", "a-b", "20000-10000", "80-90"):
        with pytest.raises(ValueError):
            rtp_port_range(bad)
    stream = RtpStream(payload_type=8, telephone_event=None, remote=("127.0.0.1", 9), rate=16000)
    port = await stream.open("127.0.0.1", (41000, 41100))
    stream.close()
    assert 41000 <= port <= 41100 and port % 2 == 0


def test_webhook_signature_matches_the_standard_webhooks_example():
    # The example of the Standard Webhooks specification (standard-webhooks/standard-webhooks, README).
    key = signing_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    signature = sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}')
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    with pytest.raises(ValueError):
        signing_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    with pytest.raises(ValueError):
        signing_key("whsec_not base64!")


def test_rtp_from_the_sdp_address_alone_does_not_latch():
    # A forged INVITE names a c= of its choosing: only the addresses given (the signalling
    # source's) may latch, not the SDP's too.
    stream = RtpStream(
        payload_type=0, telephone_event=None, remote=("192.0.2.66", 4000), rate=8000, trusted=("198.51.100.7",)
    )
    audio = encode_mulaw(np.zeros(160, np.int16))
    stream.received(build_rtp(RtpPacket(0, False, 1, 0, 9, audio)), ("192.0.2.66", 4000))
    assert not stream.latched and stream.packets == 0 and stream.dropped == 1
    stream.received(build_rtp(RtpPacket(0, False, 2, 160, 7, audio)), ("198.51.100.7", 30000))
    assert stream.latched and stream.remote == ("198.51.100.7", 30000)


class _Counter(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.received = 0

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.received += 1


async def test_rtp_goes_only_to_a_caller_proven_by_its_latch_or_its_ack():
    # The SDP's c= of a forged INVITE names someone who never spoke: nothing before the ACK, at
    # most MAX_UNPROVEN_PACKETS after it while that address sends nothing back, all once it does.
    loop = asyncio.get_running_loop()
    victim, counter = await loop.create_datagram_endpoint(_Counter, local_addr=("127.0.0.3", 0))
    address = victim.get_extra_info("sockname")
    stream = RtpStream(payload_type=0, telephone_event=None, remote=address, rate=8000, trusted=("127.0.0.3",))
    port = await stream.open("127.0.0.1")
    silence = np.zeros(160, np.int16)
    try:
        for _ in range(100):
            stream.send_samples(silence, marker=False)
        await asyncio.sleep(0.3)
        assert counter.received == 0 and stream.sent == 0 and stream.withheld == 100
        unproven = rtp.MAX_UNPROVEN_PACKETS
        stream.acknowledged()  # the 200 OK's ACK came: the SDP's address, for a while
        for _ in range(100):
            stream.send_samples(silence, marker=False)
        assert stream.sent == unproven and stream.withheld == 200 - unproven
        assert await wait_until(lambda: counter.received == unproven, 5)
        await asyncio.sleep(0.3)
        assert counter.received == unproven
        victim.sendto(build_rtp(RtpPacket(0, False, 1, 0, 7, encode_mulaw(silence))), ("127.0.0.1", port))
        assert await wait_until(lambda: stream.latched, 5)  # it speaks: proven
        for _ in range(10):
            stream.send_samples(silence, marker=False)
        assert await wait_until(lambda: counter.received == unproven + 10, 5)
    finally:
        victim.close()
        stream.close()
