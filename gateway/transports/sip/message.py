"""SIP messages (RFC 3261 section 7, ABNF of section 25): a strict parser and a serializer.

Strict where a mistake could mislead the gateway, lenient only where RFC 3261 asks for it:

- start line: ``METHOD SP Request-URI SP SIP/2.0`` (method a token, 7.1) or
  ``SIP/2.0 SP 3DIGIT SP Reason-Phrase`` (7.2); anything else is malformed;
- header lines ``name: value``, folded lines (leading space or tab) joined (7.3.1), compact
  names expanded (7.3.3), comma-separated values of the list headers split outside quotes and
  angle brackets (7.3.1);
- the mandatory headers of a request (8.1.1: Via, From, To, Call-ID, CSeq; Max-Forwards is
  defaulted to 70 when absent, a non-number is malformed), ``CSeq`` of ``<number> <METHOD>`` with the
  request's method, ``Content-Length`` a number no larger than the bytes that follow (18.3);
- limits: :data:`MAX_MESSAGE_BYTES`, :data:`MAX_HEADERS`.

A message that breaks any of these raises :class:`SipParseError`; the transport answers a request
with ``400 Bad Request`` when a response can reach its sender and be matched to its transaction
(a readable Via and a CSeq header, RFC 3261 17.1.3 and 18.2.2; From, To and Call-ID are echoed when
present), and drops the rest (a response, or a request without them). So a request whose body is
shorter than its ``Content-Length`` (UDP: 18.3 "the element SHOULD generate a 400"), that lacks a
mandatory header (8.1.1) or has a malformed CSeq or Content-Length is answered 400, not left to
retransmit for 32 s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

MAX_MESSAGE_BYTES = 16 * 1024  # a call's signalling needs a few kB (RFC 3261 18.1.1: keep UDP under the MTU)
MAX_HEADERS = 128
SIP_VERSION = "SIP/2.0"
DEFAULT_MAX_FORWARDS = 70
BRANCH_COOKIE = "z9hG4bK"  # RFC 3261 8.1.1.7: branches of RFC 3261 elements start with it

# RFC 3261 7.3.3 compact forms, plus RFC 3515 (r: Refer-To), RFC 3892 (b: Referred-By), RFC 3265 (o, u).
_COMPACT = {
    "v": "Via",
    "f": "From",
    "t": "To",
    "i": "Call-ID",
    "m": "Contact",
    "l": "Content-Length",
    "c": "Content-Type",
    "e": "Content-Encoding",
    "k": "Supported",
    "s": "Subject",
    "r": "Refer-To",
    "b": "Referred-By",
    "o": "Event",
    "u": "Allow-Events",
}
# Headers whose comma-separated values are separate header values (RFC 3261 7.3.1).
_LIST_HEADERS = {"via", "contact", "route", "record-route", "allow", "supported", "require", "allow-events"}
_CONTROL = re.compile("[\r\n\x00]")
_ECHOED = frozenset({"Via", "From", "To", "Call-ID", "CSeq"})  # what a response copies from its request
_TOKEN = re.compile(r"[A-Za-z0-9\-.!%*_+`'~]+")
_REQUEST_LINE = re.compile(r"([A-Za-z0-9\-.!%*_+`'~]+) (\S+) SIP/2\.0")
_STATUS_LINE = re.compile(r"SIP/2\.0 ([1-6][0-9]{2})(?: (.*))?")
_REQUIRED = ("Via", "From", "To", "Call-ID", "CSeq")


class SipParseError(ValueError):
    """A message that is no valid SIP (see the module docstring). ``request`` is the part read so
    far when enough of it was read to answer it with a 400 (else None)."""

    def __init__(self, message: str, request: Optional[SipRequest] = None) -> None:
        super().__init__(message)
        self.request = request


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``str.isdigit`` also takes '²', which ``int``
    refuses, and other scripts' digits)."""
    return text.isascii() and text.isdigit()


def canonical_name(name: str) -> str:
    """The header name as this module stores it: compact forms expanded, ``Call-ID`` and ``CSeq``
    spelled as RFC 3261 does, others capitalised word by word (``record-route`` -> ``Record-Route``)."""
    lowered = name.lower()
    if lowered in _COMPACT:
        return _COMPACT[lowered]
    special = {"call-id": "Call-ID", "cseq": "CSeq", "www-authenticate": "WWW-Authenticate"}
    if lowered in special:
        return special[lowered]
    return "-".join(part.capitalize() for part in lowered.split("-"))


def split_list(value: str) -> list[str]:
    """Split a header value on commas that are outside double quotes and angle brackets."""
    parts: list[str] = []
    depth = 0
    quoted = False
    start = 0
    i = 0
    while i < len(value):
        char = value[i]
        if quoted:
            if char == "\\":
                i += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(value[start:i].strip())
            start = i + 1
        i += 1
    parts.append(value[start:].strip())
    return [part for part in parts if part]


@dataclass
class SipMessage:
    """Headers as (canonical name, value) pairs in their order, and the body (bytes: out of the
    repr, so that a message logged never shows its SDP's SRTP keys, RFC 4568 ``a=crypto``)."""

    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = field(default=b"", repr=False)

    def get(self, name: str) -> Optional[str]:
        """The first value of the header ``name`` (any spelling), None if absent."""
        wanted = canonical_name(name)
        return next((value for key, value in self.headers if key == wanted), None)

    def get_all(self, name: str) -> list[str]:
        """Every value of the header ``name``, in order."""
        wanted = canonical_name(name)
        return [value for key, value in self.headers if key == wanted]

    def set(self, name: str, value: str) -> None:
        """Replace every value of ``name`` by ``value`` (added at the end if absent)."""
        wanted = canonical_name(name)
        self.headers = [(key, v) for key, v in self.headers if key != wanted]
        self.headers.append((wanted, value))

    def add(self, name: str, value: str) -> None:
        """Add a value of ``name`` after the others."""
        self.headers.append((canonical_name(name), value))

    @property
    def call_id(self) -> str:
        """The Call-ID (empty if absent: a parsed request always has one)."""
        return self.get("Call-ID") or ""

    @property
    def content_type(self) -> str:
        """The media type of the body (``Content-Type`` without parameters, lower case; "" if none)."""
        return (self.get("Content-Type") or "").split(";")[0].strip().lower()

    @property
    def cseq(self) -> tuple[int, str]:
        """(sequence number, method) of the CSeq header. Raises SipParseError when malformed."""
        return parse_cseq(self.get("CSeq") or "")

    def _head_and_body(self, start_line: str) -> bytes:
        headers = [(k, v) for k, v in self.headers if k != "Content-Length"]
        lines = [start_line, *(f"{k}: {v}" for k, v in headers), f"Content-Length: {len(self.body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


@dataclass
class SipRequest(SipMessage):
    """A request: ``method`` (upper case as sent), ``uri`` (the Request-URI, as text)."""

    method: str = ""
    uri: str = ""

    def encode(self) -> bytes:
        """The wire form (CRLF line ends, ``Content-Length`` set to the body's length)."""
        return self._head_and_body(f"{self.method} {self.uri} {SIP_VERSION}")


@dataclass
class SipResponse(SipMessage):
    """A response: ``status`` (100..699) and ``reason``."""

    status: int = 0
    reason: str = ""

    def encode(self) -> bytes:
        """The wire form (CRLF line ends, ``Content-Length`` set to the body's length)."""
        return self._head_and_body(f"{SIP_VERSION} {self.status} {self.reason}")


def parse_cseq(value: str) -> tuple[int, str]:
    """``"314159 INVITE"`` -> (314159, "INVITE"). Raises SipParseError (RFC 3261 8.1.1.5: a
    number below 2**31 and a method token)."""
    parts = value.split()
    if len(parts) != 2 or not is_digits(parts[0]) or not _TOKEN.fullmatch(parts[1]) or int(parts[0]) >= 2**31:
        raise SipParseError(f"malformed CSeq {value!r}")
    return int(parts[0]), parts[1]


def _header_lines(head: str) -> list[str]:
    lines: list[str] = []
    for line in head.split("\r\n"):
        if line[:1] in (" ", "\t"):
            if not lines:
                raise SipParseError("a folded line before any header")
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def _headers(lines: list[str]) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    for line in lines:
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise SipParseError(f"malformed header line {line[:80]!r}")
        canonical = canonical_name(name)
        value = value.strip()
        if canonical.lower() in _LIST_HEADERS:
            headers.extend((canonical, part) for part in split_list(value))
        else:
            headers.append((canonical, value))
        if len(headers) > MAX_HEADERS:
            raise SipParseError(f"over {MAX_HEADERS} header values")
    return headers


def split_message(data: bytes) -> tuple[str, bytes]:
    """(head text without the blank line, the bytes after it). Raises SipParseError when there is
    no blank line, the head is not ASCII-compatible UTF-8, or the message is too large."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise SipParseError(f"message of {len(data)} bytes (at most {MAX_MESSAGE_BYTES})")
    data = data.lstrip(b"\r\n")  # keep-alive CRLFs before a message (RFC 5626 4.4.1)
    end = data.find(b"\r\n\r\n")
    if end < 0:
        raise SipParseError("no blank line after the headers")
    try:
        head = data[:end].decode("utf-8")
    except UnicodeDecodeError:
        raise SipParseError("headers are not UTF-8") from None
    return head, data[end + 4 :]


def parse_message(data: bytes) -> SipRequest | SipResponse:
    """Parse one whole message (a UDP datagram, or one framed off a TCP stream). The body is the
    ``Content-Length`` bytes after the headers (extra bytes are ignored, RFC 3261 18.3); without a
    ``Content-Length``, all of them. Raises SipParseError (see the module docstring)."""
    head, rest = split_message(data)
    lines = _header_lines(head)
    start = lines[0] if lines else ""
    headers = _headers(lines[1:])
    length_text = next((v for k, v in headers if k == "Content-Length"), None)
    body = rest
    length_error = ""  # raised once the request is read, so that it can be answered
    if length_text is not None:
        if not is_digits(length_text):
            length_error = f"malformed Content-Length {length_text!r}"
        elif int(length_text) > len(rest):
            length_error = f"Content-Length {length_text} but {len(rest)} bytes follow"
        else:
            body = rest[: int(length_text)]
    broken = {name for name, value in headers if _CONTROL.search(value)}  # would be echoed as new lines
    status = _STATUS_LINE.fullmatch(start)
    if status and (broken or length_error):  # a response is dropped (18.3)
        raise SipParseError(length_error or f"bare CR, LF or NUL in {', '.join(broken)}")
    if status:
        response = SipResponse(headers=headers, body=body, status=int(status.group(1)), reason=status.group(2) or "")
        for name in ("Via", "CSeq", "Call-ID"):
            if response.get(name) is None:
                raise SipParseError(f"response without {name}")
        response.cseq  # noqa: B018 - raises SipParseError when malformed
        return response
    request_line = _REQUEST_LINE.fullmatch(start)
    if not request_line:
        raise SipParseError(f"malformed start line {start[:80]!r}")
    request = SipRequest(headers=headers, body=body, method=request_line.group(1), uri=request_line.group(2))
    if broken & _ECHOED:  # a 400 would echo it: not answerable
        raise SipParseError(f"bare CR, LF or NUL in {', '.join(broken)}")
    answerable = request if _answerable(request) else None
    if length_error:  # over UDP, RFC 3261 18.3: a request SHOULD get a 400
        raise SipParseError(length_error, answerable)
    _check_request(request, answerable)
    if broken:  # answerable: a 400 echoes only Via, From, To, Call-ID and CSeq
        raise SipParseError(f"bare CR, LF or NUL in {', '.join(broken)}", request)
    return request


def _answerable(request: SipRequest) -> bool:
    """Whether a 400 can answer ``request``: its Via says where the response goes (18.2.2) and
    with its CSeq the sender matches the response to its transaction (17.1.3)."""
    if request.get("CSeq") is None:
        return False
    try:
        parse_via(request.get("Via") or "")
    except SipParseError:
        return False
    return True


def _check_request(request: SipRequest, answerable: Optional[SipRequest]) -> None:
    missing = [name for name in _REQUIRED if request.get(name) is None]
    if missing:
        raise SipParseError(f"request without {', '.join(missing)}", answerable)
    try:
        _, method = request.cseq
    except SipParseError as exc:
        raise SipParseError(str(exc), answerable) from None
    if method != request.method:
        raise SipParseError(f"CSeq method {method} of a {request.method} request", request)
    max_forwards = request.get("Max-Forwards")
    if max_forwards is not None and not (is_digits(max_forwards) and int(max_forwards) <= 255):
        raise SipParseError(f"malformed Max-Forwards {max_forwards!r}", request)
    try:
        parse_via(request.get("Via") or "")
    except SipParseError as exc:
        raise SipParseError(str(exc)) from None  # no Via to answer along


def max_forwards(request: SipRequest) -> int:
    """The request's Max-Forwards (:data:`DEFAULT_MAX_FORWARDS` when absent)."""
    value = request.get("Max-Forwards")
    return int(value) if value is not None else DEFAULT_MAX_FORWARDS


@dataclass(frozen=True)
class Via:
    """One Via value (RFC 3261 20.42): ``transport`` (UDP, TCP, TLS...), ``host``, ``port``
    (None: the transport's default) and the parameters (names lower case; a flag maps to "")."""

    transport: str
    host: str
    port: Optional[int]
    params: dict[str, str]

    @property
    def branch(self) -> str:
        """The branch parameter ("" if absent)."""
        return self.params.get("branch", "")


_VIA = re.compile(
    r"SIP\s*/\s*2\.0\s*/\s*([A-Za-z]+)\s+(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-.]+)(?:\s*:\s*([0-9]{1,5}))?\s*(.*)"
)


def parse_params(text: str) -> dict[str, str]:
    """``;a=1;b;c="x"`` -> {"a": "1", "b": "", "c": "x"} (names lower case). Raises SipParseError."""
    params: dict[str, str] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        name, _, value = part.partition("=")
        name = name.strip().lower()
        if not _TOKEN.fullmatch(name):
            raise SipParseError(f"malformed parameter {part[:40]!r}")
        params[name] = value.strip().strip('"')
    return params


def parse_via(value: str) -> Via:
    """Parse one Via value. Raises SipParseError."""
    match = _VIA.fullmatch(value.strip())
    if not match:
        raise SipParseError(f"malformed Via {value[:80]!r}")
    rest = match.group(4).strip()
    if rest and not rest.startswith(";"):
        raise SipParseError(f"malformed Via {value[:80]!r}")
    port = int(match.group(3)) if match.group(3) else None
    if port is not None and not 0 < port < 65536:
        raise SipParseError(f"Via port {port}")
    return Via(match.group(1).upper(), match.group(2), port, parse_params(rest))


@dataclass(frozen=True)
class NameAddr:
    """A From/To/Contact/Route value (RFC 3261 20.10): the display name, the URI (without angle
    brackets) and the header parameters (``tag``, ``lr`` is a URI parameter and stays in the URI)."""

    display: str
    uri: str
    params: dict[str, str]

    @property
    def tag(self) -> str:
        """The tag parameter ("" if absent)."""
        return self.params.get("tag", "")

    def __str__(self) -> str:
        shown = f'"{self.display}" ' if self.display else ""
        extra = "".join(f";{k}={v}" if v else f";{k}" for k, v in self.params.items())
        return f"{shown}<{self.uri}>{extra}"


def parse_name_addr(value: str) -> NameAddr:
    """Parse ``"Bob" <sip:bob@host>;tag=x`` or ``sip:bob@host;tag=x`` (without angle brackets the
    parameters belong to the header, RFC 3261 20.10). Raises SipParseError."""
    value = value.strip()
    if "<" in value:
        display, _, rest = value.partition("<")
        uri, closed, params = rest.partition(">")
        if not closed or not uri.strip():
            raise SipParseError(f"malformed address {value[:80]!r}")
        return NameAddr(display.strip().strip('"'), uri.strip(), parse_params(params))
    uri, _, params = value.partition(";")
    if ":" not in uri:
        raise SipParseError(f"malformed address {value[:80]!r}")
    return NameAddr("", uri.strip(), parse_params(params))


@dataclass(frozen=True)
class SipUri:
    """The parts of a ``sip:`` or ``sips:`` URI this gateway routes by: user, host, port (None:
    default) and the URI parameters (``transport``, ``lr``)."""

    scheme: str
    user: str
    host: str
    port: Optional[int]
    params: dict[str, str]


_URI = re.compile(r"(sips?):(?:([^@;?]+)@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-.]+)(?::([0-9]{1,5}))?([^?]*)(\?.*)?")


def parse_uri(text: str) -> SipUri:
    """Parse a SIP URI (RFC 3261 19.1). Raises SipParseError (also for ``tel:`` and others)."""
    match = _URI.fullmatch(text.strip())
    if not match:
        raise SipParseError(f"not a SIP URI: {text[:80]!r}")
    port = int(match.group(4)) if match.group(4) else None
    return SipUri(match.group(1).lower(), match.group(2) or "", match.group(3), port, parse_params(match.group(5)))


REASONS = {
    100: "Trying",
    180: "Ringing",
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    415: "Unsupported Media Type",
    420: "Bad Extension",
    480: "Temporarily Unavailable",
    481: "Call/Transaction Does Not Exist",
    483: "Too Many Hops",
    486: "Busy Here",
    487: "Request Terminated",
    488: "Not Acceptable Here",
    500: "Server Internal Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    603: "Decline",
}


def make_response(request: SipRequest, status: int, *, to_tag: str = "", reason: str = "") -> SipResponse:
    """A response to ``request`` (RFC 3261 8.2.6.2): its Via values, From, Call-ID and CSeq copied,
    its To with ``to_tag`` added unless it has one (100 Trying gets none), and for a 101..299
    response to a dialog-forming request its Record-Route (12.1.1)."""
    response = SipResponse(status=status, reason=reason or REASONS.get(status, "Unknown"))
    for value in request.get_all("Via"):
        response.add("Via", value)
    # A malformed request (a 400) may lack From, To or Call-ID: what it has is echoed.
    if request.get("From") is not None:
        response.add("From", request.get("From") or "")
    to = request.get("To")
    if to is not None:
        if to_tag and status != 100 and ";tag=" not in to.replace(" ", "").lower():
            to = f"{to};tag={to_tag}"
        response.add("To", to)
    if request.get("Call-ID") is not None:
        response.add("Call-ID", request.call_id)
    response.add("CSeq", request.get("CSeq") or "")
    if 100 < status < 300 and request.method in ("INVITE", "SUBSCRIBE", "REFER"):
        for value in request.get_all("Record-Route"):
            response.add("Record-Route", value)
    return response
