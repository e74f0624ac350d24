"""The SDP reader both legs use (``gateway.transports.sdp``): sections, attributes by name, payload
types resolved through the codec table, the media direction; it reads what aiortc reads from the
offers real stacks send; numbers are ASCII digits."""

from __future__ import annotations

import pytest
from aiortc.sdp import SessionDescription

from gateway.media.codecs import STATIC_PAYLOAD_TYPES, find_codec
from gateway.transports.sdp import SdpSyntaxError, check_syntax, read_sdp
from gateway.transports.webrtc.offer import OfferError, check_offer
from tests.hostile.sdp_offers import offers

SRTP_OFFER = (
    "v=0\r\n"
    "o=- 1 1 IN IP4 192.0.2.10\r\n"
    "s=-\r\n"
    "c=IN IP4 192.0.2.10\r\n"
    "t=0 0\r\n"
    "a=sendonly\r\n"
    "m=audio 4000 RTP/SAVP 0 8 96 101\r\n"
    "a=rtpmap:96 opus/48000/2\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "a=fmtp:101 0-15\r\n"
    "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR\r\n"
    "junk without an equals sign\r\n"
    "m=video 0 RTP/AVP 31\r\n"
    "a=inactive\r\n"
)


def test_sections_attributes_and_payload_types_through_the_codec_table():
    description = read_sdp(SRTP_OFFER)
    assert description.session.values("c") == ["IN IP4 192.0.2.10"]
    audio, video = description.media
    assert (audio.kind, audio.port, audio.proto, audio.payload_types) == ("audio", "4000", "RTP/SAVP", [0, 8, 96, 101])
    maps = audio.rtpmaps()
    assert maps[0].codec is STATIC_PAYLOAD_TYPES[0] and maps[8].codec is STATIC_PAYLOAD_TYPES[8]  # no a=rtpmap
    assert maps[96].codec is find_codec("opus", 48000, 2) and maps[96].channels == 2
    assert maps[101].codec is find_codec("telephone-event", 8000)
    # A new attribute is read as any other: no new reader for SRTP's keys (RFC 4568).
    assert audio.attributes("crypto") == ["1 AES_CM_128_HMAC_SHA1_80 inline:PS1uQCVeeCFCanVmcjkpPywjNWhcYD0mXXtxaVBR"]
    assert audio.attributes("fmtp") == ["101 0-15"]
    assert [line.type for line in audio.lines][-1] is None  # junk is kept, with no type
    assert description.direction(audio) == "sendonly"  # the session's (RFC 8866 6.7)
    assert description.direction(video) == "inactive" and 31 not in video.rtpmaps()  # H.261: not a codec here


def test_it_reads_the_offers_real_stacks_send_as_aiortc_reads_them():
    for name, sdp in offers().items():
        if name == "no_audio":
            continue
        checked = check_offer(sdp, 64 * 1024)  # normalised as the WebRTC leg gives it to aiortc
        theirs = SessionDescription.parse(checked.sdp)
        ours = read_sdp(checked.sdp)
        assert [m.kind for m in ours.media] == [m.kind for m in theirs.media], name
        for mine, media in zip(ours.media, theirs.media, strict=True):
            assert (mine.proto, int(mine.port)) == (media.profile, media.port), name
            if media.kind != "audio":
                continue
            assert ours.direction(mine) == media.direction, name
            maps = mine.rtpmaps()
            for codec in media.rtp.codecs:
                read = maps[codec.payloadType]
                assert (read.encoding.lower(), read.clock_rate) == (codec.name.lower(), codec.clockRate), name


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ("m=audio 9 UDP/TLS/RTP/SAVPF 111", "m=audio \u00b2 UDP/TLS/RTP/SAVPF 111"),
        ("m=audio 9 UDP/TLS/RTP/SAVPF 111", "m=audio 9 UDP/TLS/RTP/SAVPF \u00b2"),
        ("a=rtpmap:111 opus", "a=rtpmap:\u00b2 opus"),
    ],
)
def test_digits_that_are_not_ascii_are_a_syntax_error_not_a_crash(line: str, bad: str):
    # str.isdigit takes '²' and int() refuses it: the offer was a ValueError (a 500), not a 400.
    chrome = offers()["chrome_like"]
    assert line in chrome
    sdp = chrome.replace(line, bad, 1)
    with pytest.raises(SdpSyntaxError, match="\u00b2"):
        check_syntax(sdp)
    with pytest.raises(OfferError, match="malformed SDP offer"):
        check_offer(sdp, 64 * 1024)
