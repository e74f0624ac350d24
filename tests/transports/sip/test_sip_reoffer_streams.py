"""SDP offer/answer loose ends of a SIP call (RFC 3264, RFC 5888, RFC 8843): a re-offer that
removes the call's audio and adds a new audio stream is followed onto the new one; ``a=mid`` is
kept on every answered m-line, a rejected one's too, and the answer has no BUNDLE group (the audio
moved out of it, RFC 8843 7.3.2); an m-line without a format is rejected alone when the audio is usable; a
hostname as connection address gets 488 with a reason phrase and ``Warning: 301``; a stream moved
back to the same address logs no move; an SRTP stream re-added under the same key with its
sequence numbers started again is heard (a new inbound SRTP session)."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from dataclasses import replace
from pathlib import Path

import pytest
from pylibsrtp import Policy, Session

from gateway.server.app_keys import SIP
from gateway.transports.sdp import check_syntax, read_sdp
from gateway.transports.sip.message import SipResponse, parse_name_addr
from gateway.transports.sip.rtp import RtpPacket, RtpStream, build_rtp
from gateway.transports.sip.sdp import SdpError, build_answer, media_lines, parse_offer, removed_stream
from gateway.transports.sip.srtp import SrtpContext, choose_crypto
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import TONE, CallerRtp, media_port, offered, origin
from tests.transports.sip.sip_socket import SipSocket

SDP_FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "sdp"
OFFERED_KEY = sip_samples.OFFERED_KEY

# A WebRTC-to-SIP bridge's offer that keeps the browser's grouping (BUNDLE, a=mid) on plain RTP
BUNDLED = (
    "v=0\r\n"
    "o=- 7169721126327183323 3 IN IP4 192.0.2.40\r\n"
    "s=-\r\n"
    "c=IN IP4 192.0.2.40\r\n"
    "t=0 0\r\n"
    "a=group:BUNDLE a0 v1 d2\r\n"
    "m=audio 40000 RTP/AVP 111 0 126\r\n"
    "a=mid:a0\r\n"
    "a=rtpmap:111 opus/48000/2\r\n"
    "a=rtpmap:0 PCMU/8000\r\n"
    "a=rtpmap:126 telephone-event/8000\r\n"
    "a=sendrecv\r\n"
    "m=video 40002 RTP/AVP 96\r\n"
    "a=mid:v1\r\n"
    "a=rtpmap:96 VP8/90000\r\n"
    "m=application 40004 UDP/DTLS/SCTP webrtc-datachannel\r\n"
    "a=mid:d2\r\n"
)

# A softphone's audio + video offer whose video m-line lost its formats on the way (a broken ALG)
NO_FORMAT_VIDEO = (
    "v=0\r\n"
    "o=- 1 1 IN IP4 192.0.2.50\r\n"
    "s=-\r\n"
    "c=IN IP4 192.0.2.50\r\n"
    "t=0 0\r\n"
    "m=audio 5004 RTP/AVP 0 101\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "m=video 5006 RTP/AVP\r\n"
    "m=application 5008 UDP/BFCP\r\n"
)

# The call's audio stream removed (port 0) and a new one added at the end, on another port
REPLACED = (
    "v=0\r\n"
    "o=- 3596944745 589469587 IN IP4 127.0.0.1\r\n"
    "s=-\r\n"
    "c=IN IP4 {rtp_host}\r\n"
    "t=0 0\r\n"
    "m=audio 0 RTP/AVP 0\r\n"
    "m=audio {rtp_port} RTP/AVP 0 100\r\n"
    "a=rtpmap:100 telephone-event/8000\r\n"
    "a=sendrecv\r\n"
)
REMOVED_SRTP = (
    "v=0\r\no=- 3596944745 589469586 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 {rtp_host}\r\nt=0 0\r\n"
    "m=audio 0 RTP/SAVP 0\r\n"
)


def m_lines(sdp: str) -> list[str]:
    return [line[2:] for line in sdp.splitlines() if line.startswith("m=")]


def mids(sdp: str) -> list[list[str]]:
    """The ``a=mid`` values of each m-section of ``sdp``."""
    return [[value or "" for value in media.attributes("mid")] for media in read_sdp(sdp).media]


def groups(sdp: str) -> list[str]:
    return [value or "" for value in read_sdp(sdp).session.attributes("group")]


# ----- BUNDLE and a=mid (RFC 5888 9.2, RFC 8843 7.3) -----
def test_every_answered_m_line_keeps_its_mid_and_the_answer_has_no_bundle_group():
    """A bridge's offer with BUNDLE (audio first, the suggested offerer-tagged m-line), video and a
    data channel: the answer keeps ``a=mid`` on all three (the rejected ones too) and has no BUNDLE
    group: the audio is moved out of it on its own port (RFC 8843 7.3.2), the others rejected
    (7.3.3), so no group may be created (7.3.1). Failed before the h41 fix: no ``a=mid`` at all.
    Failed after it (h42): ``a=group:BUNDLE a0`` was answered, which binds the answerer to RTP/RTCP
    multiplexing (``a=rtcp-mux`` in its answer when offered: 9.3.1.2, a protocol error without,
    9.3.1.3) and the MID header extension (9.1), neither of which the gateway does."""
    offer = parse_offer(BUNDLED)
    answer = build_answer(offer, "203.0.113.5", 42000)
    check_syntax(answer)
    assert m_lines(answer) == [
        "audio 42000 RTP/AVP 111 126",
        "video 0 RTP/AVP 96",
        "application 0 UDP/DTLS/SCTP webrtc-datachannel",
    ]
    assert mids(answer) == [["a0"], ["v1"], ["d2"]]
    assert groups(answer) == []
    muxed = build_answer(parse_offer(BUNDLED.replace("a=mid:a0\r\n", "a=mid:a0\r\na=rtcp-mux\r\n")), "203.0.113.5", 1)
    assert groups(muxed) == [] and "a=rtcp-mux" not in muxed

    # Video tagged first: the same
    video_tagged = BUNDLED.replace("BUNDLE a0 v1 d2", "BUNDLE v1 a0 d2")
    answer = build_answer(parse_offer(video_tagged), "203.0.113.5", 42000)
    assert groups(answer) == [] and mids(answer) == [["a0"], ["v1"], ["d2"]]

    # A mid that is no token (RFC 5888 4) is not echoed
    odd = build_answer(parse_offer(BUNDLED.replace("a=mid:v1", 'a=mid:v 1"')), "203.0.113.5", 42000)
    assert mids(odd) == [["a0"], [], ["d2"]]

    # An empty or bare a=group is no group (fuzzing found a ValueError, a 500, in e2060a1)
    for bare in ("a=group:", "a=group", "a=group:BUNDLE"):
        assert (
            groups(build_answer(parse_offer(BUNDLED.replace("a=group:BUNDLE a0 v1 d2", bare)), "203.0.113.5", 1)) == []
        )

    # Without grouping: no a=mid invented
    plain = parse_offer(BUNDLED.replace("a=group:BUNDLE a0 v1 d2\r\n", "").replace("a=mid:", "a=label:"))
    assert mids(build_answer(plain, "203.0.113.5", 42000)) == [[], [], []]

    # The audio removed (port 0): answered port 0 with its mid
    removal = BUNDLED.replace("m=audio 40000", "m=audio 0")
    assert removed_stream(removal, offer.slot)
    gone = build_answer(replace(offer, lines=media_lines(removal)), "203.0.113.5", 42000, removed=True)
    assert groups(gone) == [] and mids(gone) == [["a0"], ["v1"], ["d2"]] and m_lines(gone)[0].startswith("audio 0 ")


def test_a_real_chromium_offer_bridged_to_rtp_keeps_its_mids():
    """Chromium 120's audio + video offer (../shared, mid 0 and 1, BUNDLE 0 1, ``a=rtcp-mux``) as a
    bridge that ends the DTLS hands it on: the answer carries ``a=mid:0`` and ``a=mid:1`` and no
    BUNDLE group (before: ``BUNDLE 0`` without ``a=rtcp-mux``, RFC 8843 9.3.1.3's protocol error)."""
    path = SDP_FIXTURES / "exwebrtc_chromium_audio_video_offer.sdp"
    if not path.exists():
        pytest.skip("../shared/fixtures/sdp is not here")
    bridged = path.read_text().replace("UDP/TLS/RTP/SAVPF", "RTP/AVP").replace("c=IN IP4 0.0.0.0", "c=IN IP4 192.0.2.9")
    bridged = bridged.replace("m=audio 9 ", "m=audio 40000 ")
    answer = build_answer(parse_offer(bridged), "203.0.113.5", 42000)
    check_syntax(answer)
    assert "a=rtcp-mux" in bridged
    assert mids(answer) == [["0"], ["1"]] and groups(answer) == []
    assert m_lines(answer) == ["audio 42000 RTP/AVP 111 110", "video 0 RTP/AVP 96"]


# ----- an m-line without a format (RFC 8866 5.14) -----
def test_an_m_line_without_a_format_is_rejected_alone_when_the_audio_is_usable():
    """Video and BFCP lines without a format beside a usable audio stream: both rejected (port 0,
    a format of the answer's own so that it is well-formed), the audio answered. Failed before:
    SdpError for the whole offer (488). A call whose audio is the malformed one still gets it."""
    offer = parse_offer(NO_FORMAT_VIDEO)
    answer = build_answer(offer, "203.0.113.5", 42000)
    check_syntax(answer)
    assert m_lines(answer) == ["audio 42000 RTP/AVP 0 101", "video 0 RTP/AVP 0", "application 0 UDP/BFCP *"]
    assert len(media_lines(NO_FORMAT_VIDEO, at_least=3)) == 3  # a re-offer's count reads it too

    audio_malformed = NO_FORMAT_VIDEO.replace("m=audio 5004 RTP/AVP 0 101", "m=audio 5004 RTP/AVP")
    with pytest.raises(SdpError, match="without a format"):
        parse_offer(audio_malformed)
    with pytest.raises(SdpError, match="without a format"):  # a re-offer: the call's audio is the malformed one
        parse_offer(audio_malformed, slot=0)
    assert parse_offer(NO_FORMAT_VIDEO.replace("m=video 5006 RTP/AVP", "m=audio 5006 RTP/AVP")).slot == 0


# ----- a hostname as connection address -----
def test_a_hostname_as_connection_address_gets_a_reason_phrase_and_warning_301():
    """RFC 3261 20.43: 301 "incompatible network address formats" says what is wrong; the reason
    phrase too (a bridge logs and relays it). Before: 399 and the bare "Not Acceptable Here"."""
    with pytest.raises(SdpError) as refused:
        parse_offer("v=0\r\nc=IN IP4 media.example.invalid\r\nm=audio 4000 RTP/AVP 0\r\n")
    assert refused.value.warning_code == 301 and "hostname" in refused.value.reason
    assert refused.value.warning.startswith('301 voice-gateway "connection address')


def test_a_warning_quoting_the_offer_stays_one_quoted_string():
    """The 488's Warning text quotes the offer: a ``"`` or ``\\`` in it is escaped (RFC 3261 25.1
    quoted-pair) and a long line is cut, so a peer parses one warn-text. Failed before: the text
    closed its quotes early (``... "c=IN IP4 a"b" ...``) and 2 KB of offer were echoed."""
    with pytest.raises(SdpError) as refused:
        parse_offer('v=0\r\nc=IN IP4 a"b\\' + "x" * 2000 + "\r\nm=audio 4000 RTP/AVP 0\r\n")
    warning = refused.value.warning
    assert re.fullmatch(r'\d{3} voice-gateway "(?:[^"\\]|\\.)*"', warning), warning
    assert '\\"b\\\\' in warning and len(warning) < 260


# ----- RtpStream.move -----
def test_a_stream_moved_to_the_same_address_logs_no_move(caplog: pytest.LogCaptureFixture):
    """A stream brought back at the address it had latches anew but has not moved. Failed before:
    "RTP moved by a re-INVITE: 127.0.0.1:4000 -> 127.0.0.1:4000"."""
    stream = RtpStream(payload_type=0, telephone_event=101, remote=("127.0.0.1", 4000), rate=16000)
    stream.latched = True
    with caplog.at_level(logging.INFO, logger="gateway.transports.sip.rtp"):
        stream.move(("127.0.0.1", 4000))
        assert not stream.latched and "moved" not in caplog.text
        stream.move(("127.0.0.1", 4002))
    assert "RTP moved by a re-INVITE: 127.0.0.1:4000 -> 127.0.0.1:4002" in caplog.text


# ----- SRTP: a new stream under the same key -----
def _srtp_packet(sender: Session, sequence: int, ssrc: int = 7) -> bytes:
    return sender.protect(build_rtp(RtpPacket(0, False, sequence & 0xFFFF, 160 * sequence, ssrc, TONE)))


def test_a_restarted_srtp_stream_under_the_same_key_passes_as_a_new_stream():
    """libsrtp's replay list takes a new stream's sequence numbers (started again, same key and
    SSRC) for replays: every packet dropped. A new stream gets a new inbound session."""
    key = base64.b64decode(OFFERED_KEY)
    context = SrtpContext(choose_crypto([f"1 AES_CM_128_HMAC_SHA1_80 inline:{OFFERED_KEY}"]))
    first = Session(Policy(key, Policy.SSRC_ANY_OUTBOUND))
    assert all(context.unprotect(_srtp_packet(first, 30000 + n)) is not None for n in range(20))
    again = Session(Policy(key, Policy.SSRC_ANY_OUTBOUND))
    assert context.unprotect(_srtp_packet(again, 1)) is None and context.replayed == 1  # as before the fix
    context.rekey(context.keys, new_stream=True)
    assert all(context.unprotect(_srtp_packet(again, n)) is not None for n in range(2, 22))


# ----- over real SIP and RTP -----
@pytest.mark.slow
async def test_a_reoffer_replacing_the_audio_stream_is_followed_onto_the_new_one(models, gateway_config):
    """A bridge replaces its leg: its re-INVITE sets the call's audio m-line to port 0 and adds a
    new audio stream at the end, on another port (RFC 3264 8.2, 8.3). The answer rejects the old
    m-line and answers the new one on the gateway's port; the new port's packets are heard
    (latched anew), replies go there, its telephone-event payload type (100, was 101) is answered
    and read, and the call outlives the media timeout. A refresh of that
    offer repeats the answer (the new m-line is the call's now). Failed before: both m-lines
    answered with port 0, nothing heard, and the media timeout ended the call. Also: an INVITE
    with a hostname in ``c=`` gets 488 with the reason phrase and ``Warning: 301``, and so does a
    re-INVITE, the call going on."""
    config = sip_config(gateway_config, media_timeout_s=1.5)
    first_socket, _first, first_port = await media_port()
    second_socket, second, second_port = await media_port()

    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            async with SipSocket(config.sip_port) as named:
                named.send(sip_samples.invite(port, caller_port=named.port, call_id="named-1", rtp_host="localhost"))
                refused = await named.response(488, within=15)
                assert refused.reason == "Not Acceptable Here (hostname in c=)", refused.encode()
                assert (refused.get("Warning") or "").startswith("301 voice-gateway"), refused.encode()

            caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=first_port))
            ok = await caller.response(200, within=15)
            assert isinstance(ok, SipResponse)
            answer = ok.body.decode()
            gateway_port = int(re.search(r"m=audio (\d+) RTP/AVP", answer).group(1))  # type: ignore[union-attr]
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKreplaceack", caller_port=caller.port))
            call = next(iter(app[SIP].calls.values()))
            rtp = CallerRtp(gateway_port)

            def send(socket: asyncio.DatagramTransport, ssrc: int, count: int) -> None:
                rtp.send(socket, count, ssrc=ssrc)

            send(first_socket, 11, 10)
            assert await wait_until(lambda: call.rtp.packets == 10 and call.rtp.latched, 10)

            replaced = (await offered(caller, port, tag, REPLACED, second_port, 39458)).body.decode()
            assert m_lines(replaced) == ["audio 0 RTP/AVP 0", f"audio {gateway_port} RTP/AVP 0 100"], replaced
            assert origin(replaced) == (origin(answer)[0], origin(answer)[1] + 1)
            assert call.offer.slot == 1 and call.rtp.remote == ("127.0.0.1", second_port)
            assert call.rtp.telephone_event == 100  # the new stream's (the answer lists only the offer's formats)
            sent_before = len(second.datagrams)
            for _ in range(12):  # 2.4 s of the new stream: longer than the media timeout
                send(second_socket, 22, 5)
                await asyncio.sleep(0.2)
            assert call.rtp.packets >= 60 and call.end_reason is None, (call.rtp.packets, call.end_reason)
            assert await wait_until(lambda: len(second.datagrams) >= sent_before + 5, 10)

            refreshed = await offered(caller, port, tag, REPLACED, second_port, 39459)
            assert refreshed.status == 200 and refreshed.body.decode() == replaced

            named_again = REPLACED.replace("c=IN IP4 {rtp_host}", "c=IN IP4 localhost")
            refused = await offered(caller, port, tag, named_again, second_port, 39460)
            assert refused.status == 488 and refused.reason == "Not Acceptable Here (hostname in c=)"
            send(second_socket, 22, 5)  # the call goes on as it was
            assert await wait_until(lambda: call.rtp.packets >= 65, 10) and call.end_reason is None

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39461))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        first_socket.close()
        second_socket.close()


@pytest.mark.slow
async def test_an_srtp_stream_brought_back_under_the_same_key_is_heard(models, gateway_config):
    """SDES-SRTP: the caller removes its stream (port 0) and brings it back with the same key and
    SSRC, its sequence numbers started again (a new stream, RFC 3264 8.2). Failed before: the
    call's one inbound libsrtp session took them for replays and dropped every packet (deaf)."""
    config = sip_config(gateway_config, media_timeout_s=30.0)
    media_socket, _media, rtp_port = await media_port()
    key = base64.b64decode(OFFERED_KEY)
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            srtp_sdp = sip_samples.BARESIP_SRTP_SDP
            caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=rtp_port, sdp=srtp_sdp))
            ok = await caller.response(200, within=15)
            gateway_port = int(re.search(r"m=audio (\d+) RTP/SAVP", ok.body.decode()).group(1))  # type: ignore[union-attr]
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKsrtpbackack", caller_port=caller.port))
            call = next(iter(app[SIP].calls.values()))
            first = Session(Policy(key, Policy.SSRC_ANY_OUTBOUND))
            for n in range(20):
                media_socket.sendto(_srtp_packet(first, 30000 + n), ("127.0.0.1", gateway_port))
            assert await wait_until(lambda: call.rtp.packets == 20, 10)

            removed = (await offered(caller, port, tag, REMOVED_SRTP, rtp_port, 39458)).body.decode()
            assert m_lines(removed) == ["audio 0 RTP/SAVP 0"], removed
            back = (await offered(caller, port, tag, srtp_sdp, rtp_port, 39459)).body.decode()
            assert f"m=audio {gateway_port} RTP/SAVP 0 101" in back and "a=crypto:1 " in back
            again = Session(Policy(key, Policy.SSRC_ANY_OUTBOUND))  # the new stream: sequence numbers from 1
            for n in range(1, 21):
                media_socket.sendto(_srtp_packet(again, n), ("127.0.0.1", gateway_port))
            assert await wait_until(lambda: call.rtp.packets == 40, 10), (call.rtp.packets, call.rtp.srtp.replayed)  # type: ignore[union-attr]
            assert call.rtp.srtp is not None and call.rtp.srtp.replayed == 0

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39460))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        media_socket.close()
