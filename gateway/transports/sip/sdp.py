"""SDP offer/answer for RTP telephony (RFC 3264 over RFC 8866): the caller's offer read for its
first audio stream the gateway can answer (with the SDP reader of every leg,
``gateway.transports.sdp``), an answer with one voice codec, ``telephone-event`` and, for SRTP,
the gateway's own key.

- **Streams** (RFC 3264 6): the answer holds one m-line per offered m-line, in the offer's order.
  The audio stream taken (its position, the call's *slot*: :attr:`AudioOffer.slot`) is answered
  as below; every other one (video, a second audio stream, ``m=application`` BFCP or T.140, an
  audio stream the gateway cannot answer) is rejected: port 0, its media type, profile and a
  format, each the offer's when grammatical (:class:`MediaLine`). A re-offer is read at the same
  slot (RFC 3264 8: m-line positions are fixed for the session); m-lines it adds at the end are
  rejected too.
- **Codecs**: the rows of the codec table (``gateway.media.codecs``) answered on ``sip``: Opus
  (48 kHz, wideband) when offered, else the first of PCMU and PCMA the offer lists (8 kHz; a
  static payload type needs no ``a=rtpmap``): the offered voice codec of the highest clock rate,
  ties in the offer's order. A softphone that lists Opus gets it (the gateway's speech
  recognition hears 16 kHz: G.711's 8 kHz loses the upper half); a trunk that offers G.711 only
  gets G.711. RFC 4733 ``telephone-event`` is answered at the voice codec's clock rate when
  offered, else at 8000 Hz (what SIP phones offer beside Opus). A re-offer takes the voice codecs
  of the call's clock rate only (``parse_offer(..., clock_rate=)``).
- **Profiles**: plain RTP (``RTP/AVP``, ``RTP/AVPF``: the gateway sends no feedback) and SDES-SRTP
  (``RTP/SAVP``, ``RTP/SAVPF`` with RFC 4568 ``a=crypto``: ``gateway.transports.sip.srtp``).
  The call's SRTP policy (:data:`SRTP_POLICIES`, from ``sip_srtp`` by :func:`srtp_policy`):
  ``required``: SRTP or nothing, on ``RTP/SAVP`` or on ``RTP/AVP`` with ``a=crypto`` (a "best
  effort" offer); ``optional``: SRTP when the offer has ``a=crypto``, else plain RTP;
  ``off``: plain RTP only (``a=crypto`` on ``RTP/AVP`` is left unanswered, ``RTP/SAVP`` refused).
  The answer keeps the offer's profile (``RTP/AVPF`` is answered ``RTP/AVP``).
- **Refused** (:class:`SdpError`, which the call turns into ``488 Not Acceptable Here``): no
  audio stream with a port (RFC 3264 5.1: port 0 is a stream offered disabled) on one of those
  profiles (DTLS ``UDP/TLS/RTP/SAVPF``: a WebRTC offer belongs at ``POST /v1/realtime/calls``),
  none of those codecs, SRTP without a usable key, or plain RTP where SRTP is required; of
  several audio streams the first the gateway can answer is taken, and when none can be, the
  first one's reason is given. The direction answered mirrors the offer's (its m-section's, else
  the session's: RFC 8866 6.7). A connection address (``c=``) that is a hostname (RFC 8866 5.7
  allows one; SIP user agents, PBXs and bridges put IP addresses there) is refused with the
  reason phrase ``Not Acceptable Here (hostname in c=)`` and ``Warning: 301`` (RFC 3261 20.43:
  incompatible network address formats), which a B2BUA can act on (re-offer with its relay's
  IP): resolving it would let any offer make the gateway look up a name of the caller's choice
  (its own resolver, the executor's threads tied up by slow names) for a case no SIP peer sends.
- **Malformed m-lines**: an m-line without a format (RFC 8866 5.14 requires one) that is not the
  audio stream taken is rejected like any other (port 0, a format of the answer's own); the offer
  is refused only when no audio stream is usable (a re-offer: when the call's is the malformed one).
- **Removed**: a re-offer whose m-line at the call's slot has port 0 or holds no audio stream
  (:func:`removed_stream`; RFC 3264 8.2, a re-INVITE's) is answered with port 0 there too
  (``build_answer(..., removed=True)``), unless it adds another audio stream the gateway can
  answer (:func:`added_stream`, RFC 3264 8.1): the call then follows that one
  (``gateway.transports.sip.call``); one it rejected before stays rejected.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from dataclasses import dataclass, replace
from typing import Optional

from gateway.media.codecs import DTMF_EVENTS, SIP, TELEPHONE_EVENT, Codec, CodecUse, answered
from gateway.transports.sdp import SdpDescription, SdpMedia, is_digits, is_payload_type, is_proto, is_token, read_sdp
from gateway.transports.sip.srtp import SdesError, SdesKeys, choose_crypto

# The RTP profiles answered: plain (RFC 3551 RTP/AVP, RFC 4585 RTP/AVPF: the gateway sends no
# feedback) and SRTP with SDES keys (RFC 3711 RTP/SAVP, RFC 5124 RTP/SAVPF; RFC 4568).
RTP_PROFILES = ("RTP/AVP", "RTP/AVPF")
SRTP_PROFILES = ("RTP/SAVP", "RTP/SAVPF")
# The SRTP policies of a call (see the module docstring), and the ``sip_srtp`` settings: ``auto``
# is ``required`` for a call over TLS or to a ``sips:`` URI, ``optional`` otherwise.
SRTP_POLICIES = ("required", "optional", "off")
SRTP_SETTINGS = ("auto", *SRTP_POLICIES)
# The most characters of a 488's Warning text: its message quotes the offer, which may be long.
MAX_WARNING_TEXT = 200


class SdpError(ValueError):
    """An offer the gateway cannot answer (see the module docstring): answered ``488`` with
    ``reason`` as its reason phrase (empty: ``Not Acceptable Here``) and a ``Warning`` of
    ``warning_code`` (RFC 3261 20.43: 399 miscellaneous; 301 incompatible network address
    formats) holding the message."""

    def __init__(self, message: str, *, warning_code: int = 399, reason: str = "") -> None:
        super().__init__(message)
        self.warning_code = warning_code
        self.reason = reason

    @property
    def warning(self) -> str:
        """The ``Warning`` header value of its 488 (RFC 3261 20.43): the message, which may quote the
        offer, as one quoted-string (its ``"`` and ``\\`` escaped, RFC 3261 25.1), cut to
        :data:`MAX_WARNING_TEXT` characters."""
        text = str(self)[:MAX_WARNING_TEXT].replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.warning_code} voice-gateway "{text}"'


def srtp_setting(text: str) -> str:
    """``sip_srtp`` checked: one of :data:`SRTP_SETTINGS`. Raises ValueError."""
    setting = text.strip().lower()
    if setting not in SRTP_SETTINGS:
        raise ValueError(f"sip_srtp {text!r}: use {', '.join(SRTP_SETTINGS)}")
    return setting


def srtp_policy(setting: str, transport: str, request_uri: str = "") -> str:
    """The SRTP policy of a call whose INVITE came over ``transport`` (UDP, TCP, TLS) to
    ``request_uri`` under the ``sip_srtp`` ``setting``: ``auto`` is ``required`` over TLS or for
    a ``sips:`` Request-URI (RFC 3261 19.1: the caller asked for a secure call; keys in the SDP
    are safe only under TLS), ``optional`` otherwise."""
    if setting == "auto":
        secure = transport == "TLS" or request_uri[:5].lower() == "sips:"
        return "required" if secure else "optional"
    return setting


@dataclass(frozen=True)
class MediaLine:
    """One offered m-line as a rejection repeats it (RFC 3264 6): ``m=<kind> 0 <proto> <format>``,
    its media type, transport protocol and one format, and its ``a=mid`` (RFC 5888 9.2: the answer
    keeps each m-line's identification tag, a rejected one's too; None: none offered, or one that
    is no token of at most 64 characters); ``disabled``: the offer gave it port 0 (RFC 3264 8.1:
    a slot a new stream may reuse).

    A rejected m-line must still be a grammatical one (RFC 3264 6: port 0, "at least one [format]
    MUST be present, as specified by SDP"; RFC 8866 5.14, 9: ``media`` and ``fmt`` are tokens,
    ``proto`` is ``token *("/" token)``) as ``gateway.transports.sdp`` reads it (protocols in
    capitals, as aiortc parses them). Each field is the offer's when it is one, else the answer's
    own: the media type (which the offerer compares: RFC 3264 6.1) ``application``; the protocol
    in capitals when only its case is off (T.38's ``udptl``, RFC 8866's ``udp``: pjmedia compares
    protocols without case, and in some releases on a rejected line too), else ``RTP/AVP``, then
    with format ``0`` (the offer's formats belong to another protocol); the format the first
    offered one that fits (an RTP payload type 0..127 but 72..76 on ``m=audio``/``m=video``, a
    token elsewhere), else ``0`` (``*`` on a protocol that is not RTP). The offerer ignores the
    formats of a rejected line (RFC 3264 6)."""

    kind: str
    proto: str
    format: str
    mid: Optional[str] = None
    disabled: bool = False

    @classmethod
    def of(cls, media: SdpMedia) -> MediaLine:
        kind = media.kind if is_token(media.kind) else "application"
        offered_proto = is_proto(media.proto.upper())
        proto = media.proto.upper() if offered_proto else "RTP/AVP"
        fits = is_payload_type if kind in ("audio", "video") else is_token
        formats = [fmt for fmt in media.formats if fits(fmt)] if offered_proto else []
        fmt = formats[0] if formats else ("0" if proto.startswith("RTP/") or kind in ("audio", "video") else "*")
        mids = [mid.strip() for mid in media.attributes("mid") if mid and is_token(mid.strip()) and len(mid) <= 64]
        disabled = is_digits(media.port) and int(media.port) == 0
        return cls(kind, proto, fmt, mids[0] if mids else None, disabled)

    @property
    def rejected(self) -> str:
        return f"m={self.kind} 0 {self.proto} {self.format}"

    @property
    def mid_lines(self) -> list[str]:
        """Its ``a=mid`` line, if offered one."""
        return [f"a=mid:{self.mid}"] if self.mid is not None else []


def media_lines(sdp: str, at_least: int = 0) -> tuple[MediaLine, ...]:
    """The m-lines of ``sdp`` in order. Raises SdpError for fewer than ``at_least`` (a re-offer:
    RFC 3264 8, an m-line is never dropped, only set to port 0)."""
    lines = _media_lines(read_sdp(sdp))
    if len(lines) < at_least:
        raise SdpError(f"the offer has {len(lines)} m-lines, the session {at_least} (RFC 3264 8: none may go)")
    return lines


def _media_lines(description: SdpDescription) -> tuple[MediaLine, ...]:
    return tuple(MediaLine.of(media) for media in description.media)


@dataclass(frozen=True)
class AudioOffer:
    """The caller's audio stream the gateway answers: where its RTP comes from and goes to
    (``address``, ``port``), the codec chosen (``payload_type``, e.g. 0, 8 or a dynamic one for Opus; ``voice``
    its row of the codec table, ``codec`` its name: "PCMU", "PCMA", "opus"), the
    ``telephone-event`` payload type (None if not offered) and its clock rate (Hz), the
    ``direction`` offered (sendrecv, sendonly, recvonly, inactive), ``ptime`` (ms), the
    ``profile`` answered (RTP/AVP, RTP/SAVP, RTP/SAVPF) and the SRTP ``keys`` (None: plain RTP);
    ``slot`` its position among the offer's m-lines, ``lines`` all of them (the answer's others:
    rejected; empty: the answer has the audio stream alone)."""

    address: str
    port: int
    payload_type: int
    voice: Codec
    telephone_event: Optional[int]
    direction: str
    ptime: int
    telephone_event_rate: int = 8000
    profile: str = "RTP/AVP"
    keys: Optional[SdesKeys] = None
    slot: int = 0
    lines: tuple[MediaLine, ...] = ()

    @property
    def codec(self) -> str:
        return self.voice.encoding


def parse_offer(
    sdp: str, srtp: str = "optional", slot: Optional[int] = None, clock_rate: Optional[int] = None
) -> AudioOffer:
    """Read an SDP offer under the SRTP policy ``srtp`` (one of :data:`SRTP_POLICIES`): its first
    audio stream the gateway can answer, or (a re-offer) the one at m-line position ``slot``;
    ``clock_rate`` (a re-offer: the call's, Hz) takes only voice codecs of that rate. Raises
    SdpError when there is none (see the module docstring)."""
    description = read_sdp(sdp)
    lines = _media_lines(description)
    session_address = ""
    for value in description.session.values("c"):
        session_address = _connection_address(value)
    if slot is not None and (slot >= len(description.media) or description.media[slot].kind != "audio"):
        raise SdpError(f"no audio stream at m-line {slot + 1}, the call's (RFC 3264 8)")
    refusal: Optional[SdpError] = None
    for index, media in enumerate(description.media):
        if media.kind != "audio" or (slot is not None and index != slot):
            continue
        try:
            if not media.formats:  # RFC 8866 5.14: at least one; another m-line without one is rejected
                raise SdpError(f"an audio m-line without a format: {'m=' + media.lines[0].value!r}")
            profile, keys = _security(media, srtp)
            audio = _audio(description, media, session_address, clock_rate)
        except SdpError as exc:
            refusal = refusal or exc
            continue
        return replace(audio, profile=profile, keys=keys, slot=index, lines=lines)
    raise refusal or SdpError("no audio stream in the offer")


def added_stream(sdp: str, previous: tuple[MediaLine, ...], srtp: str, clock_rate: Optional[int] = None) -> AudioOffer:
    """The audio stream a re-offer adds (RFC 3264 8.1: an m-line below the ``previous`` offer's,
    or one in a slot that offer disabled with port 0), the first the gateway can answer
    (:func:`parse_offer` at its slot, under ``srtp`` and ``clock_rate``): the stream a call whose
    own was removed moves to. Any other m-line is the stream it was in the previous offer, which
    the gateway answered with port 0: rejected (RFC 3264 6: no media flows for it), and so it
    stays until the offerer disables it and brings it back, or adds another. Raises SdpError when
    the offer adds none the gateway can answer."""
    refusal: Optional[SdpError] = None
    for index, media in enumerate(read_sdp(sdp).media):
        if media.kind == "audio" and (index >= len(previous) or previous[index].disabled):
            try:
                return parse_offer(sdp, srtp, slot=index, clock_rate=clock_rate)
            except SdpError as exc:
                refusal = refusal or exc
    raise refusal or SdpError("no audio stream added (RFC 3264 8.1), and the call's has port 0")


def removed_stream(sdp: str, slot: int) -> bool:
    """True when the offer's m-line at position ``slot`` (the call's audio stream) has port 0 or
    holds no audio stream (its slot reused for another media type): the stream is removed or
    disabled (RFC 3264 8.2, 5.1), not held. Its m-line may list any one format and omit its
    other attributes: it is not read further. An offer without that m-line: False (the caller
    checks the count, :func:`media_lines`)."""
    media = read_sdp(sdp).media
    if slot >= len(media):
        return False
    port = media[slot].port
    return media[slot].kind != "audio" or (is_digits(port) and int(port) == 0)


def _security(media: SdpMedia, srtp: str) -> tuple[str, Optional[SdesKeys]]:
    """The profile answered and the SRTP keys (None: plain RTP) of ``media`` under ``srtp``."""
    crypto = media.attributes("crypto")
    if media.proto in SRTP_PROFILES:
        if srtp == "off":
            raise SdpError(f"SRTP ({media.proto}) offered, and this gateway's sip_srtp is off")
        return media.proto, _keys(crypto, media.proto)
    if media.proto not in RTP_PROFILES:
        raise SdpError(f"audio over {media.proto} (answered here: RTP/AVP, and RTP/SAVP with a=crypto)")
    if srtp == "required":
        if not crypto:
            raise SdpError("plain RTP offered where SRTP is required (RTP/SAVP with a=crypto; sip_srtp)")
        return "RTP/AVP", _keys(crypto, media.proto)
    if srtp == "optional" and crypto:
        try:  # a "best effort" offer: its keys if they can be answered, else plain RTP
            return "RTP/AVP", choose_crypto(crypto)
        except SdesError:
            pass
    return "RTP/AVP", None


def _keys(crypto: list[Optional[str]], proto: str) -> SdesKeys:
    try:
        return choose_crypto(crypto)
    except SdesError as exc:
        raise SdpError(f"SRTP ({proto}): {exc}") from None


def _connection_address(value: str) -> str:
    fields = value.split()
    if len(fields) != 3 or fields[0] != "IN" or fields[1] not in ("IP4", "IP6"):
        raise SdpError(f"unusable connection line {'c=' + value!r}")
    address = fields[2].split("/")[0]
    try:  # an IP literal only: see the module docstring (Refused)
        ipaddress.ip_address(address)
    except ValueError:
        raise SdpError(
            f"connection address {address[:80]!r} is not an IP address: give the media's IP address in c=",
            warning_code=301,
            reason="Not Acceptable Here (hostname in c=)",
        ) from None
    return address


def _audio(description: SdpDescription, media: SdpMedia, session_address: str, clock_rate: Optional[int]) -> AudioOffer:
    if not is_digits(media.port) or not 0 <= int(media.port) < 65536:
        raise SdpError(f"bad audio port {media.port!r}")
    if int(media.port) == 0:  # RFC 3264 5.1: a stream offered disabled
        raise SdpError("the offer's audio stream has port 0 (disabled): a voice call needs one")
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

    voices = [(pt, row) for pt in media.payload_types if (row := answered_row(pt, CodecUse.VOICE)) is not None]
    if clock_rate is not None:  # a re-offer: the call's playout and packets are at its clock rate
        voices = [(pt, row) for pt, row in voices if row.clock_rate == clock_rate]
    if not voices:
        rows = [codec for codec in answered(SIP, CodecUse.VOICE) if clock_rate in (None, codec.clock_rate)]
        names = ", ".join(codec.encoding for codec in rows)
        at = (
            f" at {clock_rate} Hz (the call's clock rate: a change of it mid-call is not supported)"
            if clock_rate
            else ""
        )
        raise SdpError(f"none of {names} offered{at}")
    # the highest clock rate (Opus: wideband), ties in the offer's order (sorted() keeps it)
    voice_type, voice = sorted(voices, key=lambda offered: -(offered[1].clock_rate or 0))[0]
    events = {maps[pt].clock_rate: pt for pt in reversed(media.payload_types) if answered_row(pt, CodecUse.KEY_PRESSES)}
    event_rate = voice.clock_rate if voice.clock_rate is not None and voice.clock_rate in events else 8000
    return AudioOffer(
        address=address,
        port=int(media.port),
        payload_type=voice_type,
        voice=voice,
        telephone_event=events.get(event_rate),
        direction=description.direction(media),
        ptime=ptime,
        telephone_event_rate=event_rate,
    )


_ANSWER_DIRECTION = {"sendrecv": "sendrecv", "sendonly": "recvonly", "recvonly": "sendonly", "inactive": "inactive"}


def new_origin() -> tuple[int, int]:
    """A new answer's ``o=`` session id and version (RFC 4566 5.2: the version an NTP-like time)."""
    return secrets.randbelow(2**31), int(time.time())


def build_answer(
    offer: AudioOffer, address: str, port: int, origin: Optional[tuple[int, int]] = None, *, removed: bool = False
) -> str:
    """The SDP answer: one m-line per offered one, in order (RFC 3264 6; ``offer.lines``), the
    others rejected (:class:`MediaLine`), and at ``offer.slot``: our RTP ``address`` and
    ``port``, the offer's profile, the chosen codec, ``telephone-event`` if offered (events 0-15:
    the DTMF digits), our SRTP key if SRTP (RFC 4568: the offer's tag and suite), 20 ms packets,
    the direction that mirrors the offer's. ``origin``: the ``o=`` session id and version (a
    re-INVITE's answer keeps the id, RFC 3264 8; default new). ``removed``: the offer removed the
    stream (:func:`removed_stream`): its m-line is answered with port 0 and the codec alone (RFC
    3264 6, 8.2: no key, no other attribute; no media flows), or rejected as offered when its
    slot now holds another media type.

    Grouping (RFC 5888, RFC 8843): each m-line keeps the offer's ``a=mid``, a rejected one's too
    (the offerer matches the answer's m-sections by it), and the answer has no ``a=group:BUNDLE``:
    the audio stream is moved out of the offer's BUNDLE group on its own address and port (7.3.2,
    which an answerer may do unless the m-section is ``bundle-only`` or in a group negotiated
    before: the gateway never answers one, and a ``bundle-only`` audio line has port 0, which it
    cannot take), every other m-line is rejected (7.3.3), so no offerer-tagged m-section is left to
    select and "the answerer MUST NOT create the BUNDLE group" (7.3.1). A group with the audio would
    bind the gateway to what it does not do: RTP/RTCP multiplexing with ``a=rtcp-mux`` in its answer
    whenever the offer has it (9.3.1.2; without it the offerer takes the answer for a protocol error,
    9.3.1.3) and the MID RTP header extension (9.1)."""
    session, version = origin or new_origin()
    family = "IP6" if ":" in address else "IP4"
    lines = [
        "v=0",
        f"o=voice-gateway {session} {version} IN {family} {address}",
        "s=voice-gateway",
        f"c=IN {family} {address}",
        "t=0 0",
    ]
    offered = offer.lines or (MediaLine("audio", offer.profile, str(offer.payload_type)),)
    for index, line in enumerate(offered):
        if index != offer.slot:
            lines += [line.rejected, *line.mid_lines]
        elif not removed:
            lines += _audio_answer(offer, port, line.mid_lines)
        elif line.kind == "audio":
            lines += [
                f"m=audio 0 {offer.profile} {offer.payload_type}",
                f"a=rtpmap:{offer.payload_type} {offer.voice.rtpmap}",
                *line.mid_lines,
            ]
        else:
            lines += [line.rejected, *line.mid_lines]
    return "\r\n".join(lines) + "\r\n"


def _audio_answer(offer: AudioOffer, port: int, mid_lines: list[str]) -> list[str]:
    """The answer's m-section of the audio stream taken (see :func:`build_answer`)."""
    formats = [str(offer.payload_type)]
    attributes = [f"a=rtpmap:{offer.payload_type} {offer.voice.rtpmap}"]
    if offer.telephone_event is not None:
        formats.append(str(offer.telephone_event))
        attributes += [
            f"a=rtpmap:{offer.telephone_event} {TELEPHONE_EVENT}/{offer.telephone_event_rate}",
            f"a=fmtp:{offer.telephone_event} {DTMF_EVENTS}",
        ]
    if offer.keys is not None:
        attributes.append(f"a=crypto:{offer.keys.answer}")
    return [
        f"m=audio {port} {offer.profile} {' '.join(formats)}",
        *mid_lines,
        *attributes,
        "a=ptime:20",
        f"a={_ANSWER_DIRECTION[offer.direction]}",
    ]
