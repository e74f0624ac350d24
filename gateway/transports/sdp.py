"""SDP (RFC 8866) as every transport reads it: one reader of a description's lines and sections
(:func:`read_sdp`), with each offered RTP payload type resolved through the one codec table
(``gateway.media.codecs``), and the grammar of each line (:func:`check_syntax`).

What a leg does with a description is its own offer/answer policy: the WebRTC leg
(``gateway.transports.webrtc.offer``) checks every line first and hands the text to aiortc; the SIP
leg (``gateway.transports.sip.sdp``) reads the first audio stream of an RTP offer it can answer.

- **Reader**: lines split as aiortc splits them (``str.splitlines``; RFC 8866 5 asks parsers to take
  LF as well as CRLF), each stripped; a line that is not ``<type>=<value>`` is kept but has no type
  (a lenient reader skips it). The lines before the first ``m=`` are the session's, each ``m=``
  starts a media description (5.14). A static payload type listed without ``a=rtpmap`` means the
  codec table's row (6.6). Attributes are read by name (``a=<name>[:<value>]``, 5.13), so a new one
  (``a=crypto``, RFC 4568) is read as any other.
- **Grammar** (:func:`check_syntax`): aiortc's SDP parser (``aiortc.sdp.SessionDescription.parse``)
  fails on a malformed line with a bare Python exception (``not enough values to unpack``,
  ``StopIteration``, an ``AssertionError``): the caller learns nothing. :func:`check_syntax` reads
  the same lines first, with the grammar of the RFC that defines each one, so that a bad offer is
  refused with the line number, the line and what is wrong with it; whatever passes here, aiortc's
  parser reads without raising. Numbers are ASCII digits (``str.isdigit`` also takes ``²``).

Sources: RFC 8866 (SDP: ``<type>=<value>`` lines, 5.14 ``m=``, 5.7 ``c=``, 6.6 ``a=rtpmap``,
6.7 media direction, 6.15 ``a=fmtp``), RFC 8839 (``a=candidate``, ``a=ice-ufrag``, ``a=ice-pwd``),
RFC 8122 / RFC 8842 (``a=fingerprint``, ``a=setup``), RFC 4585 (``a=rtcp-fb``), RFC 8285
(``a=extmap``), RFC 5576 (``a=ssrc``, ``a=ssrc-group``), RFC 3605 (``a=rtcp``), RFC 8841
(``a=sctp-port``, ``a=max-message-size``), RFC 5888 (``a=mid``, ``a=group``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

from aioice import Candidate
from aiortc import rtp

from gateway.media.codecs import STATIC_PAYLOAD_TYPES, Codec, find_codec

_LINE = re.compile(r"^[a-z]=")
_M_LINE = re.compile(r"^m=(\S+) (\S+) (\S+)((?: \S+)+)$")
_CONNECTION = re.compile(r"^IN (IP4|IP6) ([^ ]+)$")
# RFC 8866 5.14/9: proto = token *("/" token), here in capitals only, as aiortc parses it
# (``[A-Z/]+``): RFC 8866's lowercase ``udp`` (and T.38's ``udptl``) are not read.
_PROTO = re.compile(r"[A-Z]+(?:/[A-Z]+)*")
# RFC 8866 9: token = 1*token-char (media, fmt, and each part of proto; RFC 5888's identification-tag)
_TOKEN = re.compile(r"[!#$%&'*+\-.0-9A-Z^_`a-z{|}~]+")
_SETUP_VALUES = ("active", "passive", "actpass")
DIRECTIONS = ("sendrecv", "sendonly", "recvonly", "inactive")
# The RTP payload type is 7 bits (RFC 3550 5.1); 72..76 collide with RTCP packet types (RFC 5761 4).
_MAX_PAYLOAD_TYPE = 127


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``str.isdigit`` also takes '²', which ``int``
    refuses, and other scripts' digits)."""
    return text.isascii() and text.isdigit()


def is_token(text: str) -> bool:
    """Whether ``text`` is an RFC 8866 ``token`` (section 9: media, fmt, an identification-tag)."""
    return _TOKEN.fullmatch(text) is not None


def is_proto(text: str) -> bool:
    """Whether ``text`` is a transport protocol of an ``m=`` line as this grammar reads it (RFC 8866
    5.14 ``token *("/" token)``, in capitals as aiortc parses it: ``RTP/AVP``, ``UDP/TLS/RTP/SAVPF``)."""
    return _PROTO.fullmatch(text) is not None


def is_payload_type(text: str) -> bool:
    """Whether ``text`` is an RTP payload type an ``m=audio``/``m=video`` line may list: 0..127
    (RFC 3550 5.1: 7 bits), not 72..76 (they collide with RTCP packet types, RFC 5761 4)."""
    return is_digits(text) and int(text) <= _MAX_PAYLOAD_TYPE and int(text) not in rtp.FORBIDDEN_PAYLOAD_TYPES


# ----- the reader -----
@dataclass(frozen=True)
class SdpLine:
    """One line: ``text`` as given (no line end), ``number`` from 1, ``type`` the letter of a
    ``<type>=<value>`` line (None for any other line: blank, junk) and ``value`` after the ``=``
    (both of the stripped line)."""

    number: int
    text: str
    type: Optional[str]
    value: str

    @classmethod
    def of(cls, number: int, text: str) -> SdpLine:
        stripped = text.strip()
        typed = len(stripped) >= 2 and stripped[1] == "="
        return cls(number, text, stripped[0] if typed else None, stripped[2:] if typed else "")

    @property
    def attribute(self) -> tuple[str, Optional[str]]:
        """``a=name:value`` -> (name, value); ``a=flag`` -> (flag, None) (RFC 8866 5.13)."""
        return _split_attribute(self.value)


def _split_attribute(text: str) -> tuple[str, Optional[str]]:
    """``name:value`` -> (name, value); ``flag`` -> (flag, None), as aiortc splits it."""
    name, colon, value = text.partition(":")
    return name, value if colon else None


def sdp_lines(sdp: str) -> list[SdpLine]:
    """Every line of ``sdp``, numbered from 1, split as aiortc splits them (``str.splitlines``)."""
    return [SdpLine.of(number, text) for number, text in enumerate(sdp.splitlines(), 1)]


@dataclass(frozen=True)
class RtpMap:
    """What a payload type of an m-section stands for: ``a=rtpmap:<pt> <encoding>/<clock rate>[/<channels>]``
    (RFC 8866 6.6), or the codec table's row of a static one; ``codec`` the table's row (None: a
    codec the gateway does not know, or an rtpmap that is no such text)."""

    encoding: str
    clock_rate: Optional[int]
    channels: int = 1

    @classmethod
    def parse(cls, text: str) -> RtpMap:
        parts = text.strip().split("/")
        if len(parts) in (2, 3) and all(is_digits(part) for part in parts[1:]):
            return cls(parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 1)
        return cls(text.strip(), None)

    @property
    def codec(self) -> Optional[Codec]:
        return find_codec(self.encoding, self.clock_rate, self.channels) if self.clock_rate is not None else None


@dataclass
class SdpSection:
    """The session-level lines, or one media description's (its ``m=`` line first)."""

    lines: list[SdpLine] = field(default_factory=list)

    def values(self, line_type: str) -> list[str]:
        """The values of its ``<line_type>=`` lines (e.g. ``"c"``), in order."""
        return [line.value for line in self.lines if line.type == line_type]

    def attributes(self, name: str) -> list[Optional[str]]:
        """The values of its ``a=<name>`` attributes in order (None for a flag: ``a=sendonly``)."""
        return [line.attribute[1] for line in self.lines if line.type == "a" and line.attribute[0] == name]

    @property
    def direction(self) -> Optional[str]:
        """Its direction attribute (RFC 8866 6.7: sendrecv, sendonly, recvonly, inactive; the
        last one given), None when it has none."""
        flags = [line.value for line in self.lines if line.type == "a" and line.value in DIRECTIONS]
        return flags[-1] if flags else None


@dataclass
class SdpMedia(SdpSection):
    """One media description: ``m=<kind> <port> <proto> <format> ...`` (RFC 8866 5.14; fields it
    lacks are empty) and its lines."""

    @property
    def fields(self) -> list[str]:
        return self.lines[0].value.split()

    @property
    def kind(self) -> str:
        return (self.fields or [""])[0]

    @property
    def port(self) -> str:
        fields = self.fields
        return fields[1] if len(fields) > 1 else ""

    @property
    def proto(self) -> str:
        fields = self.fields
        return fields[2] if len(fields) > 2 else ""

    @property
    def formats(self) -> list[str]:
        return self.fields[3:]

    @property
    def payload_types(self) -> list[int]:
        """The formats that are RTP payload types (:func:`is_payload_type`: 0..127 but 72..76), in
        the offer's order of preference."""
        return [int(fmt) for fmt in self.formats if is_payload_type(fmt)]

    def rtpmaps(self) -> dict[int, RtpMap]:
        """{payload type: what it stands for}: its ``a=rtpmap`` lines (the last for a payload
        type), and the codec table's row for a static payload type listed without one."""
        maps: dict[int, RtpMap] = {}
        for value in self.attributes("rtpmap"):
            number, _, name = (value or "").partition(" ")
            if is_digits(number):
                maps[int(number)] = RtpMap.parse(name)
        for payload_type in self.payload_types:
            static = STATIC_PAYLOAD_TYPES.get(payload_type)
            if payload_type not in maps and static is not None:
                maps[payload_type] = RtpMap(static.encoding, static.clock_rate, static.channels)
        return maps


@dataclass
class SdpDescription:
    """A session description as read: ``session`` (the lines before the first ``m=``) and ``media``."""

    session: SdpSection
    media: list[SdpMedia]

    def direction(self, media: SdpMedia) -> str:
        """The direction of ``media``: its own, else the session's, else ``sendrecv`` (RFC 8866 6.7)."""
        return media.direction or self.session.direction or "sendrecv"


def read_sdp(sdp: str) -> SdpDescription:
    """Read ``sdp`` into its sections (see the module docstring). Never raises: what a leg cannot
    use, it refuses itself."""
    description = SdpDescription(SdpSection(), [])
    section: SdpSection = description.session
    for line in sdp_lines(sdp):
        if line.type == "m":
            section = SdpMedia()
            description.media.append(section)
        section.lines.append(line)
    return description


# ----- the grammar -----
class SdpSyntaxError(ValueError):
    """One line of the offer breaks its grammar. ``line_number`` counts from 1; the message names
    the line, the attribute and the rule (e.g. ``line 9 (a=fmtp:101 0-15): payload type 101 has
    no a=rtpmap in its m-section``)."""

    def __init__(self, line_number: int, line: str, problem: str) -> None:
        shown = line if len(line) <= 60 else line[:57] + "..."
        super().__init__(f"line {line_number} ({shown}): {problem}")
        self.line_number = line_number


def _is_int(text: str, low: int = 0, high: Optional[int] = None) -> bool:
    if not is_digits(text):
        return False
    value = int(text)
    return value >= low and (high is None or value <= high)


# ----- one checker per attribute aiortc reads: value -> problem (None when the value is fine) -----
def _fingerprint(value: str) -> Optional[str]:
    if len(value.split()) != 2:
        return "must be 'a=fingerprint:<hash function> <fingerprint>' (RFC 8122 5)"
    return None


def _setup(value: str) -> Optional[str]:
    if value not in _SETUP_VALUES:
        return f"a=setup must be active, passive or actpass (RFC 8842 5.1), not {value[:20]!r}"
    return None


def _not_empty(value: str) -> Optional[str]:
    return None if value.strip() else "has no value"


def _candidate(value: str) -> Optional[str]:
    problem = (
        "must be 'a=candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type>' "
        "(RFC 8839 5.1)"
    )
    bits = value.split()
    if len(bits) < 8 or bits[6] != "typ":
        return problem
    try:
        Candidate.from_sdp(value)
    except ValueError:
        return problem
    return None


def _extmap(value: str) -> Optional[str]:
    bits = value.split()
    if len(bits) != 2 or not re.match(r"^\d+(/(sendrecv|sendonly|recvonly|inactive))?$", bits[0]):
        return "must be 'a=extmap:<id>[/<direction>] <URI>' (RFC 8285 8; extension attributes are not supported)"
    return None


def _integer(value: str) -> Optional[str]:
    return None if _is_int(value.strip()) else "must be a whole number"


def _rtcp(value: str) -> Optional[str]:
    bits = value.split(" ", 1)
    if not _is_int(bits[0], 0, 65535):
        return "must be 'a=rtcp:<port> [IN IP4|IP6 <address>]' (RFC 3605 2.1)"
    if len(bits) > 1 and not _CONNECTION.match(bits[1]):
        return "must be 'a=rtcp:<port> [IN IP4|IP6 <address>]' (RFC 3605 2.1)"
    return None


def _rtpmap(value: str) -> Optional[str]:
    problem = "must be 'a=rtpmap:<payload type> <encoding name>/<clock rate>[/<channels>]' (RFC 8866 6.6)"
    bits = value.split(" ", 1)
    if len(bits) != 2 or not _is_int(bits[0], 0, _MAX_PAYLOAD_TYPE):
        return problem
    encoding = bits[1].split("/")
    if len(encoding) not in (2, 3) or not encoding[0] or not all(_is_int(part, 1) for part in encoding[1:]):
        return problem
    return None


def _fmtp(value: str) -> Optional[str]:
    bits = value.split(" ", 1)
    if len(bits) != 2 or not _is_int(bits[0], 0, _MAX_PAYLOAD_TYPE):
        return "must be 'a=fmtp:<payload type> <format parameters>' (RFC 8866 6.15)"
    return None


def _rtcp_fb(value: str) -> Optional[str]:
    bits = value.split()
    if len(bits) < 2 or not (bits[0] == "*" or _is_int(bits[0], 0, _MAX_PAYLOAD_TYPE)):
        return "must be 'a=rtcp-fb:<payload type or *> <feedback type> [<parameter>]' (RFC 4585 4.2)"
    return None


def _sctpmap(value: str) -> Optional[str]:
    bits = value.split(" ", 1)
    if len(bits) != 2 or not _is_int(bits[0]):
        return "must be 'a=sctpmap:<port> <protocol> [<streams>]'"
    return None


def _ssrc_group(value: str) -> Optional[str]:
    bits = value.split()
    if not bits or not all(_is_int(bit) for bit in bits[1:]):
        return "must be 'a=ssrc-group:<semantics> <SSRC> ...' with numeric SSRCs (RFC 5576 4.2)"
    return None


def _ssrc(value: str) -> Optional[str]:
    bits = value.split(" ", 1)
    if len(bits) != 2 or not _is_int(bits[0], 0, 2**32 - 1):
        return "must be 'a=ssrc:<SSRC> <attribute>[:<value>]' (RFC 5576 4.1)"
    return None


_CHECKS: dict[str, Callable[[str], Optional[str]]] = {
    "fingerprint": _fingerprint,
    "setup": _setup,
    "ice-ufrag": _not_empty,
    "ice-pwd": _not_empty,
    "candidate": _candidate,
    "extmap": _extmap,
    "max-message-size": _integer,
    "mid": _not_empty,
    "rtcp": _rtcp,
    "rtpmap": _rtpmap,
    "fmtp": _fmtp,
    "rtcp-fb": _rtcp_fb,
    "sctpmap": _sctpmap,
    "sctp-port": _integer,
    "ssrc-group": _ssrc_group,
    "ssrc": _ssrc,
}
_SESSION_ATTRIBUTES = frozenset({"fingerprint", "setup", "ice-ufrag", "ice-pwd"})


def _media_line(line: str) -> tuple[Optional[str], Optional[str]]:
    """(kind, problem) of an ``m=`` line (RFC 8866 5.14)."""
    match = _M_LINE.match(line)
    if match is None:
        return None, "must be 'm=<media> <port> <proto> <fmt> ...' (RFC 8866 5.14)"
    kind, port, proto, formats = match.group(1), match.group(2), match.group(3), match.group(4).split()
    if "/" in port:
        return kind, "a port count ('<port>/<number of ports>', RFC 8866 5.14) is not supported here"
    if not _is_int(port, 0, 65535):
        return kind, f"the port must be a number 0..65535, not {port[:20]!r}"
    if not is_proto(proto):
        return kind, f"unknown transport protocol {proto[:30]!r} (e.g. UDP/TLS/RTP/SAVPF, UDP/DTLS/SCTP)"
    if kind in ("audio", "video"):
        for fmt in formats:
            if not _is_int(fmt, 0, _MAX_PAYLOAD_TYPE):
                return kind, f"RTP payload type {fmt[:20]!r} is not a number 0..{_MAX_PAYLOAD_TYPE}"
            if int(fmt) in rtp.FORBIDDEN_PAYLOAD_TYPES:
                return kind, f"RTP payload type {fmt} collides with RTCP (72..76 are forbidden, RFC 5761 4)"
    return kind, None


def check_syntax(sdp: str) -> None:
    """Check every line of ``sdp`` (any line ending) against its grammar.

    Raises SdpSyntaxError for the first bad line: not ``<letter>=<value>``, no ``v=0`` first, a
    malformed ``m=`` or ``c=`` line, an attribute aiortc reads whose value has the wrong shape, or
    an ``a=fmtp`` for a payload type with no ``a=rtpmap`` in its m-section (a static audio payload
    type needs none: :func:`gateway.transports.webrtc.offer.normalize_offer` adds it). Lines are split as
    :func:`read_sdp` splits them.
    """
    lines = sdp_lines(sdp)
    first = next((line for line in lines if line.text.strip()), None)
    if first is None or first.text.strip() != "v=0":
        shown, number = (first.text, first.number) if first is not None else ("", 1)
        raise SdpSyntaxError(number, shown, "an SDP description must start with 'v=0' (RFC 8866 5.1)")
    in_media = False
    mapped: set[str] = set()  # payload types with an a=rtpmap in the current m-section
    fmtps: list[tuple[int, str, str]] = []
    for number, line in ((line.number, line.text) for line in lines):
        if not line.strip():
            continue
        if not _LINE.match(line):
            raise SdpSyntaxError(
                number, line, "an SDP line must be '<type>=<value>' with a one-letter type (RFC 8866 5)"
            )
        if line.startswith("m="):
            _check_fmtps(fmtps, mapped)
            in_media, mapped, fmtps = True, set(), []
            kind, problem = _media_line(line)
            if kind == "audio" and problem is None:  # static payload types need no a=rtpmap
                mapped = {fmt for fmt in line.split()[3:] if int(fmt) in STATIC_PAYLOAD_TYPES}
        elif line.startswith("c="):
            problem = None if _CONNECTION.match(line[2:]) else "must be 'c=IN IP4|IP6 <address>' (RFC 8866 5.7)"
        elif line.startswith("v="):
            problem = None if line.strip() == "v=0" else "only SDP version 0 exists (RFC 8866 5.1)"
        elif line.startswith("a="):
            name, value = _split_attribute(line[2:])
            check = _CHECKS.get(name)
            if check is None or (not in_media and name not in _SESSION_ATTRIBUTES):
                continue  # attributes aiortc does not read are ignored (RFC 8866 5.13)
            problem = f"a={name} needs a value" if value is None else check(value)
            if problem is None and name == "rtpmap" and value is not None:
                mapped.add(value.split(" ", 1)[0])
            elif problem is None and name == "fmtp" and value is not None:
                fmtps.append((number, line, value.split(" ", 1)[0]))
        else:
            continue
        if problem is not None:
            raise SdpSyntaxError(number, line, problem)
    _check_fmtps(fmtps, mapped)


def _check_fmtps(fmtps: list[tuple[int, str, str]], mapped: set[str]) -> None:
    for number, line, payload_type in fmtps:
        if payload_type not in mapped:
            raise SdpSyntaxError(
                number, line, f"payload type {payload_type} has no a=rtpmap in its m-section (RFC 8866 6.15)"
            )
