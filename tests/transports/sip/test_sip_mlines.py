"""SIP answers with one m-line per offered stream (RFC 3264 6): the first audio stream the gateway
can answer is taken, every other m-line (video, a second audio stream, ``m=application`` BFCP or
a data channel, ``m=text`` T.140) is answered with port 0, in the offer's order; a re-offer is read
at the call's m-line position (RFC 3264 8), and m-lines it adds at the end get port 0 too.

Before, the answer always held one ``m=audio`` line: a softphone that offered audio + video
(Linphone, Zoiper, a WebRTC-to-SIP bridge) got an answer with fewer m-lines than its offer, which
RFC 3264 makes invalid (a strict phone drops the call, another pairs the audio answer with its
video stream), and an offer whose first audio stream the gateway could not use got 488 even when
a later one was usable."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gateway.media.g711 import decode_mulaw, encode_mulaw
from gateway.server.app_keys import SIP
from gateway.transports.sdp import read_sdp
from gateway.transports.sip.message import parse_name_addr
from gateway.transports.sip.rtp import RtpPacket, build_rtp, parse_rtp
from gateway.transports.sip.sdp import SdpError, build_answer, media_lines, parse_offer, removed_stream
from tests.helpers import app_idle, content_words, says, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.baresip_phone import transcribed
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import MediaPort, media_port, offered, origin
from tests.transports.sip.sip_samples import BARESIP_SDP
from tests.transports.sip.sip_socket import SipSocket
from tests.transports.websocket.ws_client import EventClient

SDP_FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "sdp"

# Linphone 5's audio + video offer (its default codecs; addresses of the test)
LINPHONE_AUDIO_VIDEO = (
    "v=0\r\n"
    "o=alice 2154 2473 IN IP4 192.0.2.10\r\n"
    "s=Talk\r\n"
    "c=IN IP4 192.0.2.10\r\n"
    "t=0 0\r\n"
    "a=rtcp-xr:rcvr-rtt=all:10000 stat-summary=loss,dup,jitt,TTL voip-metrics\r\n"
    "m=audio 7078 RTP/AVP 96 97 98 0 8 18 101 99 100\r\n"
    "a=rtpmap:96 opus/48000/2\r\n"
    "a=fmtp:96 useinbandfec=1\r\n"
    "a=rtpmap:97 speex/16000\r\n"
    "a=fmtp:97 vbr=on\r\n"
    "a=rtpmap:98 speex/8000\r\n"
    "a=fmtp:98 vbr=on\r\n"
    "a=fmtp:18 annexb=yes\r\n"
    "a=rtpmap:101 telephone-event/48000\r\n"
    "a=rtpmap:99 telephone-event/16000\r\n"
    "a=rtpmap:100 telephone-event/8000\r\n"
    "a=rtcp-fb:* trr-int 1000\r\n"
    "a=rtcp-fb:* ccm tmmbr\r\n"
    "m=video 9078 RTP/AVP 96 97\r\n"
    "a=rtpmap:96 VP8/90000\r\n"
    "a=rtpmap:97 H264/90000\r\n"
    "a=fmtp:97 profile-level-id=42801F\r\n"
    "a=rtcp-fb:* trr-int 1000\r\n"
    "a=rtcp-fb:96 nack pli\r\n"
    "a=rtcp-fb:97 ccm fir\r\n"
)

# A conference client's offer: BFCP floor control first (RFC 8856), then audio, then T.140 text
BFCP_AUDIO_TEXT = (
    "v=0\r\n"
    "o=- 1 1 IN IP4 192.0.2.20\r\n"
    "s=-\r\n"
    "c=IN IP4 192.0.2.20\r\n"
    "t=0 0\r\n"
    "m=application 50000 TCP/BFCP *\r\n"
    "a=setup:actpass\r\n"
    "a=connection:new\r\n"
    "a=floorctrl:c-s\r\n"
    "a=confid:4321\r\n"
    "a=userid:1234\r\n"
    "m=audio 5004 RTP/AVP 8 101\r\n"
    "a=rtpmap:8 PCMA/8000\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "m=text 5006 RTP/AVP 98\r\n"
    "a=rtpmap:98 t140/1000\r\n"
)

# Two audio streams, the first of a codec the gateway does not answer (G.722)
TWO_AUDIO = (
    "v=0\r\n"
    "o=- 1 1 IN IP4 192.0.2.30\r\n"
    "s=-\r\n"
    "c=IN IP4 192.0.2.30\r\n"
    "t=0 0\r\n"
    "m=audio 5004 RTP/AVP 9\r\n"
    "a=rtpmap:9 G722/8000\r\n"
    "m=audio 5006 RTP/AVP 0 101\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
)

# baresip's offer with a video stream before its audio (a video phone, a bridge that lists video first)
_SESSION, _AUDIO = BARESIP_SDP.split("m=audio")
VIDEO_THEN_AUDIO = f"{_SESSION}m=video 20006 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\na=sendrecv\r\nm=audio{_AUDIO}"
QUESTION = "What is the capital of France?"


def m_lines(sdp: str) -> list[str]:
    """The ``m=`` lines of ``sdp``, in order."""
    return [line[2:] for line in sdp.splitlines() if line.startswith("m=")]


def test_audio_and_video_get_one_m_line_each_in_the_offers_order():
    """Linphone's audio + video offer: the audio stream answered as before (Opus, its 48 kHz
    telephone-event), the video stream rejected with port 0 after it. Failed before: one m-line."""
    offer = parse_offer(LINPHONE_AUDIO_VIDEO)
    answer = build_answer(offer, "203.0.113.5", 40000)
    assert m_lines(answer) == ["audio 40000 RTP/AVP 96 101", "video 0 RTP/AVP 96"]
    assert (offer.codec, offer.port, offer.telephone_event, offer.slot) == ("opus", 7078, 101, 0)
    media = read_sdp(answer).media
    assert [section.kind for section in media] == ["audio", "video"]
    # the rejected stream carries no attribute of its own: the audio's follow the audio m-line
    assert media[1].lines[1:] == [] and "a=rtpmap:96 opus/48000/2" in [line.text for line in media[0].lines]
    assert parse_offer(answer).port == 40000  # the answer reads as an offer itself

    session, audio = LINPHONE_AUDIO_VIDEO.split("m=audio")
    audio, video = audio.split("m=video")
    video_first = f"{session}m=video{video}m=audio{audio}"  # a bridge that lists video first
    swapped = parse_offer(video_first)
    assert (swapped.slot, swapped.port, swapped.codec) == (1, 7078, "opus")
    assert m_lines(build_answer(swapped, "203.0.113.5", 40000)) == ["video 0 RTP/AVP 96", "audio 40000 RTP/AVP 96 101"]


def test_an_application_stream_before_the_audio_and_text_after_it_get_port_0():
    """BFCP first, audio second, T.140 third: the answer's second m-line is the audio. Failed
    before: the answer's only m-line (audio) stood where the offer's BFCP stream was."""
    offer = parse_offer(BFCP_AUDIO_TEXT)
    answer = build_answer(offer, "203.0.113.5", 40000)
    assert m_lines(answer) == ["application 0 TCP/BFCP *", "audio 40000 RTP/AVP 8 101", "text 0 RTP/AVP 98"]
    assert (offer.slot, offer.codec, offer.port) == (1, "PCMA", 5004)
    assert "a=floorctrl" not in answer and "t140" not in answer


def test_the_first_audio_stream_the_gateway_can_answer_is_taken():
    """Two audio streams, the first G.722 only: the second is taken and the first rejected.
    Failed before: 488 (the first audio stream was the only one read). Both usable: the first."""
    offer = parse_offer(TWO_AUDIO)
    assert (offer.slot, offer.port, offer.codec, offer.telephone_event) == (1, 5006, "PCMU", 101)
    assert m_lines(build_answer(offer, "203.0.113.5", 40000)) == ["audio 0 RTP/AVP 9", "audio 40000 RTP/AVP 0 101"]

    both = TWO_AUDIO.replace("m=audio 5004 RTP/AVP 9", "m=audio 5004 RTP/AVP 8")
    first = parse_offer(both)
    assert (first.slot, first.codec) == (0, "PCMA")
    assert m_lines(build_answer(first, "203.0.113.5", 40000)) == ["audio 40000 RTP/AVP 8", "audio 0 RTP/AVP 0"]

    disabled_first = TWO_AUDIO.replace("m=audio 5004", "m=audio 0")  # RFC 3264 5.1: offered disabled
    assert parse_offer(disabled_first).slot == 1


def test_an_offer_without_a_usable_audio_stream_is_refused_with_the_first_ones_reason():
    """Video alone, or audio only of codecs or profiles the gateway does not answer: SdpError (the
    INVITE gets 488, as before), saying why the first audio stream could not be answered."""
    with pytest.raises(SdpError, match="no audio stream"):
        parse_offer("v=0\r\nc=IN IP4 192.0.2.1\r\nm=video 5004 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\n")
    g722_and_srtp = TWO_AUDIO.replace("RTP/AVP 0 101", "RTP/SAVP 0 101")
    with pytest.raises(SdpError, match="none of opus, PCMU, PCMA"):
        parse_offer(g722_and_srtp)
    with pytest.raises(SdpError, match="port 0"):  # the user agent's 488 Warning says so
        parse_offer(BARESIP_SDP.format(rtp_host="127.0.0.1", rtp_port=0))
    with pytest.raises(SdpError, match="without a format"):  # the only audio stream is the malformed one
        parse_offer("v=0\r\nc=IN IP4 192.0.2.1\r\nm=video 5004 RTP/AVP 96\r\nm=audio 5006 RTP/AVP\r\n")


def test_a_webrtc_to_sip_bridges_offer_keeps_every_m_line():
    """Safari's audio + video + data channel offer (../shared), as a bridge that ends the DTLS
    hands it on (RTP/AVP): three m-lines answered, the audio first, the others port 0."""
    path = SDP_FIXTURES / "aiortc_safari.sdp"
    if not path.exists():
        pytest.skip("../shared/fixtures/sdp is not here")
    bridged = path.read_text().replace("UDP/TLS/RTP/SAVPF", "RTP/AVP")
    offer = parse_offer(bridged)
    assert m_lines(build_answer(offer, "203.0.113.5", 40000)) == [
        "audio 40000 RTP/AVP 111 110",
        "video 0 RTP/AVP 96",
        "application 0 DTLS/SCTP 5000",
    ]
    assert (offer.slot, offer.codec, offer.address, offer.port) == (0, "opus", "1.2.3.4", 61015)


def test_a_reoffer_is_read_at_the_calls_slot_and_lines_added_at_the_end_get_port_0():
    """RFC 3264 8: m-line positions hold for the session. The call took the second audio stream;
    a re-offer that removes the first one (port 0) leaves the call's stream as it is, one that
    removes the call's removes it, one that adds a video stream at the end gets it rejected, and
    one with fewer m-lines than the session is refused. Failed before: the first audio stream was
    "the" stream, so removing the unused G.722 one removed the call's audio."""
    call = parse_offer(TWO_AUDIO)
    unused_removed = TWO_AUDIO.replace("m=audio 5004", "m=audio 0")
    assert not removed_stream(unused_removed, call.slot)
    again = parse_offer(unused_removed, slot=call.slot)
    assert (again.slot, again.port, again.codec) == (1, 5006, "PCMU")
    assert m_lines(build_answer(again, "203.0.113.5", 40000)) == ["audio 0 RTP/AVP 9", "audio 40000 RTP/AVP 0 101"]

    calls_removed = TWO_AUDIO.replace("m=audio 5006", "m=audio 0")
    assert removed_stream(calls_removed, call.slot) and not removed_stream(calls_removed, 0)
    gone = replace(call, lines=media_lines(calls_removed))
    assert m_lines(build_answer(gone, "203.0.113.5", 40000, removed=True)) == ["audio 0 RTP/AVP 9", "audio 0 RTP/AVP 0"]

    video_added = TWO_AUDIO + "m=video 5008 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\n"
    grown = parse_offer(video_added, slot=call.slot)
    assert m_lines(build_answer(grown, "203.0.113.5", 40000))[1:] == ["audio 40000 RTP/AVP 0 101", "video 0 RTP/AVP 96"]
    with pytest.raises(SdpError, match="RFC 3264 8"):
        media_lines(TWO_AUDIO.split("m=audio 5006")[0], at_least=len(call.lines))

    reused = TWO_AUDIO.replace("m=audio 5006 RTP/AVP 0 101", "m=video 5006 RTP/AVP 96")  # the slot is video now
    assert removed_stream(reused, call.slot)
    with pytest.raises(SdpError, match="no audio stream at m-line 2"):
        parse_offer(reused, slot=call.slot)
    rejected = replace(call, lines=media_lines(reused))
    assert m_lines(build_answer(rejected, "203.0.113.5", 40000, removed=True)) == [
        "audio 0 RTP/AVP 9",
        "video 0 RTP/AVP 96",
    ]


class _Microphone:
    """The caller's microphone on RTP: ``samples`` (int16 at 8 kHz) as PCMU in 20 ms packets every
    20 ms, then silence, as a phone sends, from ``socket`` to the gateway's ``port``."""

    def __init__(self, socket: asyncio.DatagramTransport, port: int, samples: np.ndarray) -> None:
        self.socket, self.port, self.samples = socket, port, samples
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        sequence = 0
        while True:
            frame = self.samples[160 * sequence : 160 * (sequence + 1)]
            frame = np.pad(frame, (0, 160 - frame.size))
            packet = RtpPacket(0, sequence == 0, sequence & 0xFFFF, 160 * sequence, 11, encode_mulaw(frame))
            self.socket.sendto(build_rtp(packet), ("127.0.0.1", self.port))
            sequence += 1
            await asyncio.sleep(0.02)

    def stop(self) -> None:
        self._task.cancel()


def _heard(media: MediaPort) -> np.ndarray:
    """What the caller received, packets one after the other: int16 at 8 kHz."""
    packets = [parse_rtp(datagram) for datagram in media.datagrams]
    return np.concatenate([decode_mulaw(p.payload) for p in packets if p is not None] or [np.zeros(0, np.int16)])


@pytest.mark.slow
async def test_a_video_phone_is_answered_on_its_audio_stream_and_hears_the_reply(models, speech_8k, gateway_config):
    """A phone offers video, then audio, over real SIP and RTP on loopback: the 200 OK answers
    both m-lines in order (video port 0, audio on the gateway's port), the caller's question is
    heard on the audio stream and the reply it hears back says what the model said. A re-INVITE
    that adds a text stream at the end gets three m-lines (the audio where it was, the next
    ``o=`` version); one that drops m-lines gets 488 and the call goes on. Failed before: the
    200 OK held one ``m=audio`` line for the offer's two."""
    config = sip_config(gateway_config, media_timeout_s=30.0, max_response_tokens=24)
    media_socket, media, rtp_port = await media_port()
    microphone = None
    try:
        async with serve(config, models) as (url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=rtp_port, sdp=VIDEO_THEN_AUDIO))
            ok = await caller.response(200, within=15)
            answer = ok.body.decode()
            lines = m_lines(answer)
            assert len(lines) == 2 and lines[0] == "video 0 RTP/AVP 96", answer
            audio = re.fullmatch(r"audio (\d+) RTP/AVP 0 101", lines[1])
            assert audio is not None, answer
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKvideoack", caller_port=caller.port))
            call = next(iter(app[SIP].calls.values()))
            async with EventClient(url, query=f"?call_id={call.id}") as control:
                spoken = np.concatenate([np.zeros(8000, np.int16), speech_8k(QUESTION)])
                microphone = _Microphone(media_socket, int(audio.group(1)), spoken)
                said = await control.answered_turn(QUESTION, misses=1)  # 8 kHz: BaresipPhone.converse
            await asyncio.sleep(0.3)  # the reply's last packets are on their way
            heard = transcribed(models.stt, _heard(media), 8000)
            assert says(heard, said, misses=len(content_words(said)) // 3), (heard, said)

            grown = VIDEO_THEN_AUDIO + "m=text 20008 RTP/AVP 98\r\na=rtpmap:98 t140/1000\r\n"
            reanswer = (await offered(caller, port, tag, grown, rtp_port, 39458)).body.decode()
            assert m_lines(reanswer) == [*lines, "text 0 RTP/AVP 98"], reanswer
            assert origin(reanswer) == (origin(answer)[0], origin(answer)[1] + 1)
            refused = await offered(caller, port, tag, BARESIP_SDP, rtp_port, 39459)  # audio alone: two dropped
            assert refused.status == 488 and "RFC 3264 8" in (refused.get("Warning") or ""), refused.encode()
            received = call.rtp.packets
            assert await wait_until(lambda: call.rtp.packets > received + 10, 10) and call.end_reason is None

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39460))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        if microphone is not None:
            microphone.stop()
        media_socket.close()
