"""The strict SIP parser (RFC 3261 7, 25): real messages parse, with compact headers, folded lines
and list headers; broken ones raise SipParseError, with the request kept when a 400 can answer it;
a seeded fuzz of real messages never raises anything else."""

from __future__ import annotations

import random

import pytest

from gateway.transports.sip.message import (
    SipParseError,
    SipRequest,
    SipResponse,
    make_response,
    parse_message,
    parse_name_addr,
    parse_uri,
    parse_via,
)
from tests.transports.sip import sip_samples


def test_baresip_invite_parses_with_its_sdp_body():
    message = parse_message(sip_samples.invite(5060))
    assert isinstance(message, SipRequest)
    assert (message.method, message.uri) == ("INVITE", "sip:agent@127.0.0.1:5060")
    assert message.cseq == (39457, "INVITE")
    assert message.get("call-id") == "d9c18dac2b108fb9"
    assert message.body.startswith(b"v=0\r\n") and message.body.endswith(b"a=ptime:20\r\n")
    via = parse_via(message.get("Via") or "")
    assert (via.transport, via.host, via.port, via.branch) == ("UDP", "127.0.0.1", 15070, "z9hG4bK9d8481eb70f7749f")
    assert "rport" in via.params
    assert parse_name_addr(message.get("From") or "").tag == "a8d970bbab519d38"


def test_compact_folded_and_list_headers():
    message = parse_message(sip_samples.PROXIED_COMPACT)
    assert isinstance(message, SipRequest)
    assert len(message.get_all("Via")) == 2
    assert message.get_all("Contact") == ["<sip:alice@127.0.0.1:15070>", "<sip:alice@127.0.0.2>"]
    sender = parse_name_addr(message.get("From") or "")
    assert (sender.display, sender.tag) == ("Alice, at home", "1928301774")  # the comma is quoted
    assert message.body == b"v=0\r"  # Content-Length 4: the rest is ignored (RFC 3261 18.3)
    assert message.get("Content-Type") == "application/sdp"
    route = parse_uri(parse_name_addr(message.get("Record-Route") or "").uri)
    assert (route.host, route.port, "lr" in route.params) == ("127.0.0.1", 5080, True)


def test_response_round_trip_keeps_vias_tag_and_record_route():
    request = parse_message(sip_samples.PROXIED_COMPACT)
    assert isinstance(request, SipRequest)
    response = make_response(request, 180, to_tag="abc")
    parsed = parse_message(response.encode())
    assert isinstance(parsed, SipResponse)
    assert (parsed.status, parsed.reason) == (180, "Ringing")
    assert parsed.get_all("Via") == request.get_all("Via")
    assert parse_name_addr(parsed.get("To") or "").tag == "abc"
    assert parsed.get_all("Record-Route") == ["<sip:127.0.0.1:5080;lr>"]
    assert parse_name_addr(make_response(request, 100, to_tag="abc").get("To") or "").tag == ""


@pytest.mark.parametrize(
    ("data", "answerable"),
    [
        (b"", False),
        (b"INVITE sip:a@b SIP/2.0\r\n", False),  # no blank line
        (b"HELLO\r\n\r\n", False),
        (b"INVITE sip:a@b SIP/3.0\r\nVia: SIP/2.0/UDP h\r\n\r\n", False),
        (sip_samples.invite(5060).replace(b"CSeq: 39457 INVITE", b"CSeq: 39457 BYE"), True),
        (sip_samples.invite(5060).replace(b"Max-Forwards: 70", b"Max-Forwards: lots"), True),
        # answered 400 (RFC 3261 18.3, 8.1.1; RFC 4475 3.1.2.7 clerr, 3.1.2.18 insuf): Via and CSeq readable
        (sip_samples.invite(5060).replace(b"Content-Length: 339", b"Content-Length: 9999"), True),
        (sip_samples.invite(5060).replace(b"Content-Length: 339", b"Content-Length: -1"), True),
        (sip_samples.invite(5060).replace(b"Call-ID: d9c18dac2b108fb9\r\n", b""), True),
        (sip_samples.invite(5060).replace(b"CSeq: 39457 INVITE", b"CSeq: abc INVITE"), True),
        (b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h\r\nCSeq: 1 BYE\r\nCall-ID: x\r\nContent-Length: 9\r\n\r\n", False),
        (sip_samples.invite(5060).replace(b"CSeq: 39457 INVITE\r\n", b""), False),  # nothing to match a 400 to
        (sip_samples.invite(5060).replace(b"Max-Forwards: 70\r\n", b"Max-Forwards 70\r\n"), False),
        (sip_samples.invite(5060).replace(b"Via: SIP/2.0/UDP", b"Via: SIP/2.0/UDP/"), False),
        (b"SIP/2.0 2000 OK\r\nVia: SIP/2.0/UDP h\r\nCSeq: 1 BYE\r\nCall-ID: x\r\n\r\n", False),
        (b"\xff\xfe INVITE\r\n\r\n", False),
        # str.isdigit() takes a superscript two, int() does not: each must still be a parse error
        (sip_samples.invite(5060).replace(b"CSeq: 39457", "CSeq: \u00b2".encode()), True),
        (sip_samples.invite(5060).replace(b"Max-Forwards: 70", "Max-Forwards: \u00b2".encode()), True),
        (sip_samples.invite(5060).replace(b"Content-Length: 339", "Content-Length: \u00b2".encode()), True),
        # a bare CR, LF or NUL inside a value would be echoed back as a header of its own
        (sip_samples.invite(5060).replace(b"Supported:", b"Supported: a\nX-Injected: yes\r\nRequire:"), True),
        (sip_samples.invite(5060).replace(b"Call-ID: d9c18dac2b108fb9", b"Call-ID: d9c\rX-CR: 1"), False),
        (sip_samples.invite(5060).replace(b"Max-Forwards: 70", b"Max-Forwards: 70\x00"), True),
        (b"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP h;branch=z9hG4bKa\r\nCSeq: 1 BYE\r\nCall-ID: x\nY: 1\r\n\r\n", False),
    ],
)
def test_malformed_messages_raise_parse_errors(data: bytes, answerable: bool):
    with pytest.raises(SipParseError) as raised:
        parse_message(data)
    assert (raised.value.request is not None) == answerable


def _mutations(rng: random.Random, data: bytes) -> bytes:
    """One seeded mutation of ``data``: bytes flipped, cut, duplicated, lines dropped or swapped."""
    kind = rng.randrange(7)
    buf = bytearray(data)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    elif kind == 1:
        del buf[rng.randrange(len(buf)) :]
    elif kind == 2:
        start = rng.randrange(len(buf))
        buf[start:start] = buf[start : start + rng.randint(1, 200)] * rng.randint(1, 50)
    elif kind in (3, 4):
        lines = bytes(buf).split(b"\r\n")
        index = rng.randrange(len(lines))
        if kind == 3:
            del lines[index]
        else:
            other = rng.randrange(len(lines))
            lines[index], lines[other] = lines[other], lines[index]
        buf = bytearray(b"\r\n".join(lines))
    elif kind == 5:
        special = rng.choice([b":", b";", b"<", b">", b'"', b"\r\n", b" ", b"\t", b",", b"=", b"\x00", b"%"])
        start = rng.randrange(len(buf))
        buf[start:start] = special * rng.randint(1, 4)
    else:
        numbers = [b"0", b"-1", b"99999999999999999999", b"65536", b"2147483648", b""]
        text = bytes(buf)
        for field in (b"Content-Length: 339", b"CSeq: 39457", b"Max-Forwards: 70", b"15070"):
            if rng.random() < 0.5:
                text = text.replace(field, field.split(b" ")[0] + b" " + rng.choice(numbers))
        buf = bytearray(text)
    return bytes(buf)


FUZZ_SEEDS = [
    sip_samples.invite(5060),
    sip_samples.PROXIED_COMPACT,
    sip_samples.in_dialog("BYE", 5060, "tag1"),
    sip_samples.in_dialog(
        "INFO", 5060, "tag1", body="Signal=5\r\nDuration=160\r\n", content_type="application/dtmf-relay"
    ),
    sip_samples.cancel(5060),
    sip_samples.options(5060),
    make_response(parse_message(sip_samples.invite(5060)), 486, to_tag="x").encode(),  # type: ignore[arg-type]
]


def _without_length(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers if name != "Content-Length"]


def test_fuzzed_messages_parse_or_raise_parse_errors_only():
    rng = random.Random(20261201)
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(6000):
        data = _mutations(rng, rng.choice(FUZZ_SEEDS))
        if rng.random() < 0.3:
            data = _mutations(rng, data)
        try:
            message = parse_message(data)
        except SipParseError:
            outcomes["refused"] += 1
            continue
        outcomes["parsed"] += 1
        # What parses is usable: it encodes again, and the encoding parses to the same thing.
        again = parse_message(message.encode())
        assert _without_length(again.headers) == _without_length(message.headers) and again.body == message.body
    assert outcomes["parsed"] > 100 and outcomes["refused"] > 100, outcomes


def test_a_message_over_16_kib_is_refused():
    # RFC 3261 18.1.1: SIP over UDP stays under the MTU; 60 kB requests only fill the memory.
    padded = sip_samples.options(5060).replace(b"Accept:", b"X-Pad: " + b"a" * 17000 + b"\r\nAccept:")
    with pytest.raises(SipParseError, match="at most 16384"):
        parse_message(padded)
