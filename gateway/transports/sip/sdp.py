"""SDP offer/answer for plain RTP telephony (RFC 3264 over RFC 8866): the caller's offer read for
its first audio stream (with the SDP reader of every leg, ``gateway.transports.sdp``), an answer
with one voice codec and ``telephone-event``.

The codecs are the rows of the codec table (``gateway.media.codecs``) answered on ``sip``: the
gateway answers the first of the offer's payload types that is one of them (PCMU or PCMA at 8 kHz;
a static payload type needs no ``a=rtpmap``), and RFC 4733 ``telephone-event`` at the voice
codec's clock rate when offered. An offer with no audio stream on a profile of
:data:`RTP_PROFILES` (SRTP ``RTP/SAVP``, DTLS ``UDP/TLS/RTP/SAVPF``: a WebRTC offer belongs at
``POST /v1/realtime/calls``) or with none of those codecs cannot be answered: :class:`SdpError`,
which the call turns into ``488 Not Acceptable Here``. The direction answered mirrors the offer's
(its m-section's, else the session's: RFC 8866 6.7).
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from dataclasses import dataclass
from typing import Optional

from gateway.media.codecs import DTMF_EVENTS, SIP, TELEPHONE_EVENT, Codec, CodecUse, answered
from gateway.transports.sdp import SdpDescription, SdpMedia, is_digits, read_sdp

# The RTP profiles answered (RFC 3551 RTP/AVP, RFC 4585 RTP/AVPF: the gateway sends no feedback).
RTP_PROFILES = ("RTP/AVP", "RTP/AVPF")


class SdpError(ValueError):
    """An offer the gateway cannot answer (see the module docstring)."""


@dataclass(frozen=True)
class AudioOffer:
    """The caller's first audio stream: where its RTP comes from and goes to (``address``,
    ``port``), the codec chosen (``payload_type``, e.g. 0 or 8; ``voice`` its row of the codec
    table, ``codec`` its name: "PCMU"/"PCMA"), the ``telephone-event`` payload type (None if not
    offered), the ``direction`` offered (sendrecv, sendonly, recvonly, inactive) and ``ptime`` (ms)."""

    address: str
    port: int
    payload_type: int
    voice: Codec
    telephone_event: Optional[int]
    direction: str
    ptime: int

    @property
    def codec(self) -> str:
        return self.voice.encoding


def parse_offer(sdp: str) -> AudioOffer:
    """Read an SDP offer. Raises SdpError when it has no usable audio stream."""
    description = read_sdp(sdp)
    session_address = ""
    for value in description.session.values("c"):
        session_address = _connection_address(value)
    for media in description.media:
        if media.kind != "audio" or not media.formats:
            continue
        if media.proto not in RTP_PROFILES:
            raise SdpError(f"audio over {media.proto} (only plain RTP/AVP is answered here)")
        return _audio(description, media, session_address)
    raise SdpError("no audio stream in the offer")


def _connection_address(value: str) -> str:
    fields = value.split()
    if len(fields) != 3 or fields[0] != "IN" or fields[1] not in ("IP4", "IP6"):
        raise SdpError(f"unusable connection line {'c=' + value!r}")
    address = fields[2].split("/")[0]
    try:  # an IP literal only: a hostname would be resolved on the event loop at every packet sent
        ipaddress.ip_address(address)
    except ValueError:
        raise SdpError(f"connection address {address!r} is not an IP address") from None
    return address


def _audio(description: SdpDescription, media: SdpMedia, session_address: str) -> AudioOffer:
    if not is_digits(media.port) or not 0 <= int(media.port) < 65536:
        raise SdpError(f"bad audio port {media.port!r}")
    address = session_address
    for value in media.values("c"):
        address = _connection_address(value)
    ptime = 20
    for given in media.attributes("ptime"):
        if given is not None and is_digits(given.strip()):
            ptime = int(given.strip())
    if not address:
        raise SdpError("no connection address for the audio stream")
    maps = media.rtpmaps()

    def answered_row(payload_type: int, use: CodecUse) -> Optional[Codec]:
        codec = maps[payload_type].codec if payload_type in maps else None
        return codec if codec is not None and codec.use is use and SIP in codec.answered_on else None

    voice_type = next((pt for pt in media.payload_types if answered_row(pt, CodecUse.VOICE)), None)
    if voice_type is None:
        names = " nor ".join(codec.encoding for codec in answered(SIP, CodecUse.VOICE))
        raise SdpError(f"neither {names} offered")
    voice = answered_row(voice_type, CodecUse.VOICE)
    assert voice is not None
    event = next(
        (
            pt
            for pt in media.payload_types
            if answered_row(pt, CodecUse.KEY_PRESSES) and maps[pt].clock_rate == voice.clock_rate
        ),
        None,
    )
    return AudioOffer(
        address=address,
        port=int(media.port),
        payload_type=voice_type,
        voice=voice,
        telephone_event=event,
        direction=description.direction(media),
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
    attributes = [f"a=rtpmap:{offer.payload_type} {offer.voice.rtpmap}"]
    if offer.telephone_event is not None:
        formats.append(str(offer.telephone_event))
        attributes += [
            f"a=rtpmap:{offer.telephone_event} {TELEPHONE_EVENT}/{offer.voice.clock_rate}",
            f"a=fmtp:{offer.telephone_event} {DTMF_EVENTS}",
        ]
    lines.append(f"m=audio {port} RTP/AVP {' '.join(formats)}")
    lines += [*attributes, "a=ptime:20", f"a={_ANSWER_DIRECTION[offer.direction]}"]
    return "\r\n".join(lines) + "\r\n"
