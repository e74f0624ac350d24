"""SDES-SRTP (RFC 4568, RFC 3711) and Opus on the SIP leg without a phone: ``a=crypto`` lines read
(suites, key lengths, lifetimes, what is refused: MKI, several keys, session parameters, a key
that is no base64 or of another length), the SRTP policy of an offer (``sip_srtp``: required,
optional, off, auto by transport), the codec chosen (Opus first: wideband), and an RTP stream on
a real UDP port that plays only authenticated SRTP: a packet with a bad tag, the wrong key or a
replay is dropped and counted, never decoded nor latched, and what the gateway sends decrypts
with its answer's key only."""

from __future__ import annotations

import asyncio
import base64
import logging
import struct

import numpy as np
import pylibsrtp
import pytest
from pylibsrtp import Policy, Session

from gateway.config import GatewayConfig
from gateway.media.g711 import decode_mulaw, encode_mulaw
from gateway.server.runner import free_port
from gateway.transports.sip.rtp import RtpPacket, RtpStream, build_rtp, parse_rtp
from gateway.transports.sip.sdp import SdpError, build_answer, parse_offer, srtp_policy, srtp_setting
from gateway.transports.sip.srtp import SUITES, SdesError, SrtpContext, choose_crypto, read_crypto
from gateway.transports.sip.user_agent import SipUserAgent
from tests.doubles import FullPoolDoorDouble
from tests.helpers import wait_until
from tests.transports.sip.sip_samples import BARESIP_OPUS_SDP, BARESIP_SDP, BARESIP_SRTP_SDP

KEY = bytes(range(30))  # AES_CM_128: 16 bytes of master key, 14 of master salt
INLINE = base64.b64encode(KEY).decode()
LINE = f"1 AES_CM_128_HMAC_SHA1_80 inline:{INLINE}"


def _offer(template: str = BARESIP_SDP, **replaced: str) -> str:
    sdp = template.format(rtp_host="127.0.0.1", rtp_port=20004)
    for old, new in replaced.items():
        sdp = sdp.replace(old.replace("_", " "), new)
    return sdp


def test_the_crypto_suites_and_their_key_lengths():
    assert {suite.name: suite.key_length for suite in SUITES} == {
        "AES_CM_128_HMAC_SHA1_80": 30,
        "AES_CM_128_HMAC_SHA1_32": 30,
        "AEAD_AES_128_GCM": 28,  # RFC 7714 14.2: 16 + 12
        "AEAD_AES_256_GCM": 44,
    }
    tag, suite, key = read_crypto(LINE)
    assert (tag, suite.name, key) == ("1", "AES_CM_128_HMAC_SHA1_80", KEY)
    assert read_crypto(f"7 AES_CM_128_HMAC_SHA1_32 inline:{INLINE}|2^20 WSH=64")[0] == "7"  # lifetime, window hint
    gcm = base64.b64encode(bytes(28)).decode()
    assert read_crypto(f"2 AEAD_AES_128_GCM inline:{gcm}")[1].name == "AEAD_AES_128_GCM"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "not '<tag>"),
        ("x AES_CM_128_HMAC_SHA1_80 inline:" + INLINE, "not '<tag>"),
        ("1 F8_128_HMAC_SHA1_80 inline:" + INLINE, "suite 'F8_128_HMAC_SHA1_80' not supported"),
        ("1 AES_CM_128_HMAC_SHA1_80 uri:https://keys.example/1", "'inline:'"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:" + INLINE + "|2^20|1:4", "master key identifier"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:" + INLINE + "|1:4", "master key identifier"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:" + INLINE + "|1:4;inline:" + INLINE + "|2:4", "several SDES keys"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:" + INLINE + " UNENCRYPTED_SRTP", "'UNENCRYPTED_SRTP' not supported"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:" + INLINE + " KDR=24", "'KDR' not supported"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:not*base64", "not base64"),
        ("1 AES_CM_128_HMAC_SHA1_80 inline:" + INLINE[:-8], "has 30 bytes, not 24"),
    ],
)
def test_a_crypto_line_that_cannot_be_answered_says_why_and_never_shows_the_key(value: str, problem: str):
    with pytest.raises(SdesError, match=problem.replace("^", r"\^").replace("(", r"\(")) as raised:
        read_crypto(value)
    assert INLINE[:8] not in str(raised.value)


def test_the_first_usable_line_is_answered_with_its_tag_suite_and_a_key_of_our_own():
    keys = choose_crypto([f"1 F8_128_HMAC_SHA1_80 inline:{INLINE}", f"2 AES_CM_128_HMAC_SHA1_32 inline:{INLINE}", LINE])
    assert (keys.tag, keys.suite.name, keys.remote_key) == ("2", "AES_CM_128_HMAC_SHA1_32", KEY)
    tag, name, key = keys.answer.split(" ")
    assert (tag, name) == ("2", "AES_CM_128_HMAC_SHA1_32") and key.startswith("inline:")
    ours = base64.b64decode(key.removeprefix("inline:"))
    assert len(ours) == 30 and ours == keys.local_key and ours != KEY
    assert choose_crypto([LINE]).local_key != choose_crypto([LINE]).local_key  # a new key per call
    assert INLINE not in repr(keys) and key.removeprefix("inline:") not in repr(keys)
    with pytest.raises(SdesError, match="no a=crypto key offered"):
        choose_crypto([])
    with pytest.raises(SdesError, match="not supported"):  # the first line's reason
        choose_crypto([f"1 F8_128_HMAC_SHA1_80 inline:{INLINE}", "2 AES_CM_128_HMAC_SHA1_80 inline:short"])


def test_srtp_offers_under_each_policy():
    savp = _offer(BARESIP_SRTP_SDP)
    for policy in ("required", "optional"):
        offer = parse_offer(savp, policy)
        assert offer.profile == "RTP/SAVP" and offer.keys is not None and offer.keys.tag == "1"
        answer = build_answer(offer, "127.0.0.1", 40000)
        assert "m=audio 40000 RTP/SAVP 0 101" in answer
        assert f"a=crypto:{offer.keys.answer}" in answer and answer.count("a=crypto") == 1
    with pytest.raises(SdpError, match="sip_srtp is off"):
        parse_offer(savp, "off")
    for missing in ("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:zCIoFOVGyjmiyiTbWRi+K+o/alU2WZnsBTMa4dOd\r\n",):
        with pytest.raises(SdpError, match=r"SRTP \(RTP/SAVP\): no a=crypto"):
            parse_offer(savp.replace(missing, ""), "optional")
    with pytest.raises(SdpError, match="has 30 bytes"):  # a wrong key: 488, whatever the policy
        parse_offer(savp.replace("BTMa4dOd", ""), "optional")

    best_effort = savp.replace("RTP/SAVP", "RTP/AVP")  # baresip's mediaenc=srtp: a=crypto on RTP/AVP
    for policy, encrypted in (("required", True), ("optional", True), ("off", False)):
        offer = parse_offer(best_effort, policy)
        assert offer.profile == "RTP/AVP" and (offer.keys is not None) == encrypted, policy
        assert ("a=crypto:1 " in build_answer(offer, "127.0.0.1", 4000)) == encrypted
    broken = best_effort.replace("inline:zCIo", "inline:*Io")
    assert parse_offer(broken, "optional").keys is None  # best effort: plain RTP
    with pytest.raises(SdpError, match="not base64"):
        parse_offer(broken, "required")

    plain = _offer()
    with pytest.raises(SdpError, match="SRTP is required"):
        parse_offer(plain, "required")
    assert parse_offer(plain, "optional").keys is None and parse_offer(plain, "off").keys is None
    with pytest.raises(SdpError, match="UDP/TLS/RTP/SAVPF"):  # DTLS-SRTP: WebRTC's, not answered here
        parse_offer(savp.replace("RTP/SAVP", "UDP/TLS/RTP/SAVPF"), "optional")


def test_the_srtp_setting_and_a_calls_policy_by_transport():
    assert [srtp_policy("auto", transport) for transport in ("TLS", "TCP", "UDP")] == [
        "required",
        "optional",
        "optional",
    ]
    assert srtp_policy("auto", "TCP", "sips:agent@gateway.example.com") == "required"  # RFC 3261 19.1
    assert srtp_policy("auto", "UDP", "sip:agent@gateway.example.com;transport=udp") == "optional"
    assert [srtp_policy(setting, "TLS") for setting in ("required", "optional", "off")] == [
        "required",
        "optional",
        "off",
    ]
    assert srtp_setting(" Required ") == "required" and GatewayConfig().sip_srtp == "auto"
    with pytest.raises(ValueError, match="sip_srtp 'mandatory': use auto, required, optional, off"):
        srtp_setting("mandatory")
    config = GatewayConfig(sip_port=free_port(), sip_host="127.0.0.1", sip_srtp="sometimes")
    with pytest.raises(ValueError, match="sip_srtp"):
        SipUserAgent(config, FullPoolDoorDouble(config.retry_after_s))


def test_opus_is_chosen_when_offered_with_its_telephone_event():
    offer = parse_offer(_offer(BARESIP_OPUS_SDP))
    assert (offer.codec, offer.payload_type, offer.telephone_event, offer.telephone_event_rate) == (
        "opus",
        96,
        101,
        8000,
    )
    answer = build_answer(offer, "127.0.0.1", 4000)
    assert "m=audio 4000 RTP/AVP 96 101" in answer and "a=rtpmap:96 opus/48000/2" in answer
    assert "a=rtpmap:101 telephone-event/8000" in answer
    g711_first = _offer(BARESIP_OPUS_SDP, **{"RTP/AVP_96_0_8_101": "RTP/AVP 0 8 96 101"})
    assert parse_offer(g711_first).codec == "opus"  # wideband first, whatever the offer's order
    at_48k = g711_first.replace("a=fmtp:101 0-15\r\n", "a=fmtp:101 0-15\r\na=rtpmap:102 telephone-event/48000\r\n")
    at_48k = at_48k.replace("RTP/AVP 0 8 96 101", "RTP/AVP 0 8 96 101 102")
    offer = parse_offer(at_48k)  # an event at the voice's clock rate is preferred (RFC 4733 2.1)
    assert (offer.telephone_event, offer.telephone_event_rate) == (102, 48000)
    assert "a=rtpmap:102 telephone-event/48000" in build_answer(offer, "127.0.0.1", 4000)
    assert parse_offer(_offer(BARESIP_OPUS_SDP, **{"RTP/AVP_96_0_8_101": "RTP/AVP 8 0 101"})).codec == "PCMA"


class _Caller:
    """The caller's side of an SRTP call on a UDP port of 127.0.0.1: protects with its key (the
    offer's), reads what the gateway sends with the answer's key."""

    def __init__(self, key: bytes, gateway_key: bytes) -> None:
        self.outbound = Session(Policy(key, Policy.SSRC_ANY_OUTBOUND))
        self.inbound = Session(Policy(gateway_key, Policy.SSRC_ANY_INBOUND))
        self.received: list[bytes] = []
        self.sequence = 0

    def packet(self, payload: bytes, payload_type: int = 0, *, ssrc: int = 7, session: Session | None = None) -> bytes:
        self.sequence += 1
        plain = build_rtp(RtpPacket(payload_type, False, self.sequence, 160 * self.sequence, ssrc, payload))
        return (session or self.outbound).protect(plain)


async def test_only_authenticated_srtp_is_played_or_latches_and_replies_decrypt_with_the_answers_key(caplog):
    caplog.set_level(logging.DEBUG)
    offer = parse_offer(_offer(BARESIP_SRTP_SDP.replace("zCIoFOVGyjmiyiTbWRi+K+o/alU2WZnsBTMa4dOd", INLINE)))
    assert offer.keys is not None
    srtp = SrtpContext(offer.keys)
    stream = RtpStream(
        payload_type=0,
        telephone_event=101,
        remote=("127.0.0.1", 9),
        rate=8000,
        trusted=("127.0.0.1",),
        srtp=srtp,
    )
    heard: list[np.ndarray] = []
    keys: list[str] = []
    dropped: list[str] = []
    stream.on_audio = lambda samples, arrival: heard.append(samples)
    stream.on_key = lambda press: keys.append(press.digit)
    stream.on_srtp_dropped = dropped.append
    port = await stream.open("127.0.0.1")
    caller = _Caller(KEY, offer.keys.local_key)
    loop = asyncio.get_running_loop()

    class _Receiver(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
            caller.received.append(data)

    sender, _ = await loop.create_datagram_endpoint(_Receiver, local_addr=("127.0.0.1", 0))
    tone = encode_mulaw((np.sin(np.arange(160) / 3) * 8000).astype(np.int16))
    wrong_key = Session(Policy(bytes(30), Policy.SSRC_ANY_OUTBOUND))

    def send(*datagrams: bytes) -> None:
        for data in datagrams:
            sender.sendto(data, ("127.0.0.1", port))

    try:
        send(*(caller.packet(tone, session=wrong_key) for _ in range(5)))  # the wrong key first
        assert await wait_until(lambda: srtp.rejected == 5, 5)
        assert not stream.latched and stream.packets == 0 and heard == [] and dropped == ["authentication"] * 5

        good = [caller.packet(tone) for _ in range(5)]
        send(*good)
        assert await wait_until(lambda: stream.packets == 5, 5)
        assert stream.latched and len(heard) == 5 and srtp.rejected == 5

        tampered = bytearray(caller.packet(tone))
        tampered[-1] ^= 0x01  # one bit of the authentication tag
        flipped = bytearray(caller.packet(tone))
        flipped[14] ^= 0x80  # one bit of the encrypted payload
        send(bytes(tampered), bytes(flipped), good[2])  # and a replay of a played packet
        assert await wait_until(lambda: srtp.replayed == 1 and srtp.rejected == 7, 5)
        assert stream.packets == 5 and len(heard) == 5
        assert dropped == ["authentication"] * 7 + ["replay"]

        press = struct.pack("!BBH", 5, 0x80, 480)
        send(caller.packet(press, 101))
        assert await wait_until(lambda: keys == ["5"], 5)

        samples = (np.sin(np.arange(160) / 5) * 6000).astype(np.int16)
        stream.send_samples(samples, marker=True)
        assert await wait_until(lambda: len(caller.received) == 1, 5)
        sealed = parse_rtp(caller.received[0])
        assert sealed is not None and sealed.payload[:160] != encode_mulaw(samples)  # encrypted
        with pytest.raises(pylibsrtp.Error, match="authentication failure"):  # not with the caller's own key
            Session(Policy(KEY, Policy.SSRC_ANY_INBOUND)).unprotect(caller.received[0])
        clear = parse_rtp(caller.inbound.unprotect(caller.received[0]))
        assert clear is not None and clear.payload == encode_mulaw(samples)
        assert np.array_equal(decode_mulaw(clear.payload), decode_mulaw(encode_mulaw(samples)))
    finally:
        sender.close()
        stream.close()
    failed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("SRTP from")]
    assert len(failed) == 1, failed  # one line per call, however many packets
    assert any("7 failed authentication, 1 replayed" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if INLINE in r.getMessage() or "inline:" in r.getMessage()]
