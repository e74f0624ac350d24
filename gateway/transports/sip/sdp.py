"""SDP offer/answer for plain RTP telephony (RFC 3264 over RFC 8866): the caller's offer read for
its first audio stream, an answer with one G.711 codec and ``telephone-event``.

The gateway answers PCMU (payload type 0) or PCMA (8) at 8 kHz, whichever the offer lists first,
and RFC 4733 ``telephone-event/8000`` when offered. An offer with no audio stream on ``RTP/AVP``
(SRTP ``RTP/SAVP``, DTLS ``UDP/TLS/RTP/SAVPF``: a WebRTC offer belongs at ``POST /v1/realtime/calls``)
or without either G.711 codec cannot be answered: :class:`SdpError`, which the call turns into
``488 Not Acceptable Here``.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from dataclasses import dataclass
from typing import Optional

from gateway.transports.sip.message import is_digits

# Static payload types of RFC 3551 table 4 the gateway speaks: (encoding name, clock rate).
G711 = {0: "PCMU", 8: "PCMA"}


class SdpError(ValueError):
    """An offer the gateway cannot answer (see the module docstring)."""


@dataclass(frozen=True)
class AudioOffer:
    """The caller's first audio stream: where its RTP comes from and goes to (``address``,
    ``port``), the codec chosen (``payload_type`` 0 or 8, ``codec`` "PCMU"/"PCMA"), the
    ``telephone-event`` payload type (None if not offered), the ``direction`` offered
    (sendrecv, sendonly, recvonly, inactive) and ``ptime`` (ms)."""

    address: str
    port: int
    payload_type: int
    codec: str
    telephone_event: Optional[int]
    direction: str
    ptime: int


def parse_offer(sdp: str) -> AudioOffer:
    """Read an SDP offer. Raises SdpError when it has no usable audio stream."""
    session_address = ""
    media: list[list[str]] = []
    for raw in sdp.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if len(line) < 2 or line[1] != "=":
            continue
        if line.startswith("m="):
            media.append([line])
        elif media:
            media[-1].append(line)
        elif line.startswith("c="):
            session_address = _connection_address(line)
    for block in media:
        fields = block[0][2:].split()
        if len(fields) < 4 or fields[0] != "audio":
            continue
        if fields[2] not in ("RTP/AVP", "RTP/AVPF"):
            raise SdpError(f"audio over {fields[2]} (only plain RTP/AVP is answered here)")
        return _audio(block, fields, session_address)
    raise SdpError("no audio stream in the offer")


def _connection_address(line: str) -> str:
    fields = line[2:].split()
    if len(fields) != 3 or fields[0] != "IN" or fields[1] not in ("IP4", "IP6"):
        raise SdpError(f"unusable connection line {line!r}")
    address = fields[2].split("/")[0]
    try:  # an IP literal only: a hostname would be resolved on the event loop at every packet sent
        ipaddress.ip_address(address)
    except ValueError:
        raise SdpError(f"connection address {address!r} is not an IP address") from None
    return address


def _audio(block: list[str], fields: list[str], session_address: str) -> AudioOffer:
    if not is_digits(fields[1]) or not 0 <= int(fields[1]) < 65536:
        raise SdpError(f"bad audio port {fields[1]!r}")
    formats = [int(f) for f in fields[3:] if is_digits(f) and int(f) < 128]
    rtpmap: dict[int, str] = {}
    address = session_address
    direction = "sendrecv"
    ptime = 20
    for line in block[1:]:
        if line.startswith("c="):
            address = _connection_address(line)
        elif line.startswith("a=rtpmap:"):
            number, _, name = line[len("a=rtpmap:") :].partition(" ")
            if is_digits(number):
                rtpmap[int(number)] = name.strip().lower()
        elif line[2:] in ("sendrecv", "sendonly", "recvonly", "inactive"):
            direction = line[2:]
        elif line.startswith("a=ptime:") and is_digits(line[8:].strip()):
            ptime = int(line[8:].strip())
    if not address:
        raise SdpError("no connection address for the audio stream")

    def name_of(pt: int) -> str:
        return rtpmap.get(pt, f"{G711[pt].lower()}/8000" if pt in G711 else "")

    codec = next((pt for pt in formats if name_of(pt) in ("pcmu/8000", "pcma/8000")), None)
    if codec is None:
        raise SdpError("neither PCMU nor PCMA offered")
    event = next((pt for pt in formats if name_of(pt) == "telephone-event/8000"), None)
    return AudioOffer(
        address=address,
        port=int(fields[1]),
        payload_type=codec,
        codec=name_of(codec).split("/")[0].upper(),
        telephone_event=event,
        direction=direction,
        ptime=ptime,
    )


_ANSWER_DIRECTION = {"sendrecv": "sendrecv", "sendonly": "recvonly", "recvonly": "sendonly", "inactive": "inactive"}


def build_answer(offer: AudioOffer, address: str, port: int) -> str:
    """The SDP answer: our RTP ``address`` and ``port``, the chosen codec, ``telephone-event`` if
    offered (events 0-15: the DTMF digits), 20 ms packets, the direction that mirrors the offer's."""
    session = secrets.randbelow(2**31)
    family = "IP6" if ":" in address else "IP4"
    formats = [str(offer.payload_type)]
    lines = [
        "v=0",
        f"o=voice-gateway {session} {int(time.time())} IN {family} {address}",
        "s=voice-gateway",
        f"c=IN {family} {address}",
        "t=0 0",
    ]
    attributes = [f"a=rtpmap:{offer.payload_type} {offer.codec}/8000"]
    if offer.telephone_event is not None:
        formats.append(str(offer.telephone_event))
        attributes += [
            f"a=rtpmap:{offer.telephone_event} telephone-event/8000",
            f"a=fmtp:{offer.telephone_event} 0-15",
        ]
    lines.append(f"m=audio {port} RTP/AVP {' '.join(formats)}")
    lines += [*attributes, "a=ptime:20", f"a={_ANSWER_DIRECTION[offer.direction]}"]
    return "\r\n".join(lines) + "\r\n"
