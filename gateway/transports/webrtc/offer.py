"""SDP offer checks and normalisation, made before a pool unit is claimed for the offer.

Sources: RFC 8866 (SDP: syntax, 6.6 static payload types without ``a=rtpmap``, 6.7 media
direction attributes), RFC 8829 (JSEP: what an offer of a WebRTC peer holds), RFC 8839 (ICE
``a=ice-ufrag`` / ``a=ice-pwd``), RFC 8842 (DTLS ``a=fingerprint`` / ``a=setup``), RFC 5761
(``a=rtcp-mux``), RFC 8843 (BUNDLE). What aiortc itself needs of an offer is the checks of its
``setRemoteDescription`` and DTLS start; :func:`gateway.transports.sdp.check_syntax` checks each line
first, and the codecs are the WebRTC rows of the codec table (``gateway.media.codecs``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from aiortc.sdp import MediaDescription, SessionDescription, grouplines

from gateway.media.codecs import STATIC_PAYLOAD_TYPES, WEBRTC, CodecUse, answered
from gateway.transports.sdp import SdpSyntaxError, check_syntax, is_digits, read_sdp

log = logging.getLogger(__name__)


class OfferError(ValueError):
    """The SDP offer cannot be used (HTTP 400, code ``invalid_offer``); the message says why, in
    SDP terms (the m-line, the line number, the attribute)."""


def _codec_name(mime_type: str) -> str:
    """``audio/opus`` -> ``opus``."""
    return mime_type.split("/", 1)[-1]


# The audio codecs aiortc can answer with (Opus, G.722, PCMU, PCMA: the WebRTC voice rows of the table).
ANSWERABLE_AUDIO_CODECS: tuple[str, ...] = tuple(codec.encoding for codec in answered(WEBRTC, CodecUse.VOICE))
_ANSWERABLE = frozenset(name.lower() for name in ANSWERABLE_AUDIO_CODECS)


@dataclass(frozen=True)
class CheckedOffer:
    """An offer that aiortc can answer: ``sdp`` is the normalised text to give it
    (:func:`normalize_offer`), ``description`` that text as aiortc parses it."""

    sdp: str
    description: SessionDescription


def check_offer(sdp: str, max_bytes: int) -> CheckedOffer:
    """Check an SDP offer (RFC 8866) line by line, normalise it, parse it as aiortc will, and check
    each m-line as aiortc will need it.

    ``max_bytes`` is the largest offer accepted (UTF-8 bytes). Raises OfferError if the offer is
    empty, too large, has a malformed line (:func:`~gateway.transports.sdp.check_syntax`),
    offers neither audio nor a data channel, has a BUNDLE group naming no m-line or two m-lines
    with one mid, or has an m-line aiortc cannot answer or connect (see :func:`check_media`).
    """
    if not sdp or not sdp.strip():
        raise OfferError("empty SDP offer")
    size = len(sdp.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise OfferError(f"SDP offer too large ({size} bytes, limit {max_bytes})")
    if sdp.lstrip().startswith(("{", "[")):
        raise OfferError(
            "the body is JSON, not an SDP offer: post the offer's SDP text (v=0, o=, s=, t=, then one "
            'm= line per media, e.g. m=audio) as application/sdp, or {"sdp": <text>} as '
            "application/json"
        )
    try:
        check_syntax(sdp)
    except SdpSyntaxError as exc:
        raise OfferError(f"malformed SDP offer: {exc}") from None
    sdp = normalize_offer(sdp)
    try:
        parsed = SessionDescription.parse(sdp)
    except Exception:  # whatever check_syntax does not foresee: no Python text for the client...
        # ...but a gap in check_syntax for the operator to see and close (the offer fuzz fails on it).
        log.warning("SDP offer passed check_syntax but aiortc could not parse it", exc_info=True)
        raise OfferError(
            "malformed SDP offer: a line does not follow RFC 8866 (expected an offer as a WebRTC peer makes it)"
        ) from None
    if not parsed.media:
        raise OfferError(
            "the offer has no m-line: an SDP offer (RFC 8866) with an audio m-line (m=audio ...) is expected"
        )
    kinds = {media.kind for media in parsed.media}
    if not kinds & {"audio", "application"}:
        raise OfferError(f"the offer has no audio m-line and no data channel (m-lines: {', '.join(sorted(kinds))})")
    _check_mids(parsed)
    session_lines, sections = grouplines(sdp)
    session_fingerprint = any(line.startswith("a=fingerprint:") for line in session_lines)
    for index, media in enumerate(parsed.media):
        has_fingerprint = session_fingerprint or any(line.startswith("a=fingerprint:") for line in sections[index])
        check_media(index, media, has_fingerprint=has_fingerprint)
    return CheckedOffer(sdp, parsed)


def _check_mids(parsed: SessionDescription) -> None:
    """Mids are unique (RFC 8866 / RFC 5888 9.1) and a BUNDLE group names existing ones (RFC 8843 7.2)."""
    mids = [media.rtp.muxId for media in parsed.media if media.rtp.muxId is not None]
    duplicate = next((mid for mid in mids if mids.count(mid) > 1), None)
    if duplicate is not None:
        raise OfferError(f"two m-lines have a=mid:{duplicate}; each m-line needs its own mid (RFC 5888 4)")
    for group in parsed.group:
        missing = [str(item) for item in group.items if item not in mids]
        if group.semantic == "BUNDLE" and missing:
            raise OfferError(f"a=group:BUNDLE names mid {missing[0]!r}, which no m-line has (RFC 8843 7.2)")


def check_media(index: int, media: MediaDescription, has_fingerprint: bool = True) -> None:
    """What aiortc needs of one m-line (number ``index``, from 0) to answer it and connect: ICE
    credentials (RFC 8839), a DTLS fingerprint and setup role (RFC 8842), RTCP multiplexing on RTP
    m-lines (RFC 5761, required by JSEP) and, for audio, one codec of ``ANSWERABLE_AUDIO_CODECS``.
    ``has_fingerprint``: whether the m-section or the session has an ``a=fingerprint`` (aiortc
    drops the DTLS parameters of a section without ``a=setup``, fingerprint included).

    Raises OfferError naming the m-line and what is missing, so that a bad offer costs no unit.
    """
    where = f"m-line {index} ({media.kind})"
    if media.ice is None or not media.ice.usernameFragment or not media.ice.password:
        raise OfferError(f"{where}: ICE username fragment or password (a=ice-ufrag, a=ice-pwd) is missing")
    if not has_fingerprint or (media.dtls is not None and not media.dtls.fingerprints):
        raise OfferError(
            f"{where}: DTLS fingerprint (a=fingerprint) is missing; this gateway speaks DTLS-SRTP only (RFC 8842)"
        )
    if media.dtls is None:
        raise OfferError(f"{where}: DTLS setup role (a=setup:actpass, active or passive) is missing (RFC 8842 5)")
    if media.kind in ("audio", "video") and not media.rtcp_mux:
        raise OfferError(f"{where}: RTCP multiplexing (a=rtcp-mux) is required")
    if media.kind == "audio":
        offered = [_codec_name(codec.mimeType) for codec in media.rtp.codecs]
        if not any(name.lower() in _ANSWERABLE for name in offered):
            raise OfferError(
                f"{where}: no audio codec in common (offered {', '.join(offered) or 'none'}; "
                f"this gateway speaks {', '.join(ANSWERABLE_AUDIO_CODECS)})"
            )


# What aiortc's setRemoteDescription / createAnswer raise for an offer, in SDP terms.
_AIORTC_FAILURES = (
    ("send parameters", "no codec in common on an audio or video m-line"),
    ("ICE username fragment", "an m-line has no ICE credentials (a=ice-ufrag, a=ice-pwd, RFC 8839)"),
    ("RTCP mux", "an RTP m-line lacks a=rtcp-mux (RFC 5761)"),
    ("DTLS setup", "an m-line's a=setup is not usable (RFC 8842)"),
    ("Media sections", "the m-lines do not match the offer's"),
)


def answer_failure(exc: BaseException) -> Optional[str]:
    """The message of a 400 for an offer that passed :func:`check_offer` but that aiortc could not
    answer (``exc``: what it raised), in SDP terms rather than Python's; None when ``exc`` is none
    of aiortc's known refusals of an offer (then it is a fault of the gateway, not of the offer)."""
    text = str(exc)
    for needle, meaning in _AIORTC_FAILURES:
        if needle in text:
            return f"cannot answer the offer: {meaning}"
    return None


def normalize_offer(sdp: str) -> str:
    """The offer as aiortc can read it, meaning unchanged (RFC 8866), its sections as
    :func:`~gateway.transports.sdp.read_sdp` reads them:

    - trailing white space is cut from every line;
    - an audio or video m-section with no direction attribute gets the session-level one, else
      ``sendrecv`` (6.7; SIP bridges rely on it, FreeSWITCH sends none, aiortc cannot answer it);
    - a static audio payload type listed on the m= line with no ``a=rtpmap`` (6.6; SIP offers
      list ``0 8`` alone) gets the codec table's rtpmap (``a=rtpmap:0 PCMU/8000``), so aiortc sees it;
    - ``a=ssrc:<ssrc> <attribute>`` lines with no value (RFC 5576 allows them) are dropped:
      aiortc reads only valued ones and fails on the others.

    An offer that needs none of it is returned unchanged (same string); a changed one has CRLF
    line ends.
    """
    description = read_sdp(sdp)
    session = [line.text.rstrip() for line in description.session.lines]
    changed = any(line.text != line.text.rstrip() for line in description.session.lines)
    out = list(session)
    for media in description.media:
        kept = [line for line in media.lines if not _valueless_ssrc(line.text.rstrip())]
        changed = changed or len(kept) != len(media.lines) or any(line.text != line.text.rstrip() for line in kept)
        out.append(kept[0].text.rstrip())
        if media.kind in ("audio", "video") and len(media.fields) > 1 and media.direction is None:
            out.append(f"a={description.direction(media)}")
            changed = True
        if media.kind == "audio":
            mapped = {(value or "").split(" ", 1)[0] for value in media.attributes("rtpmap")}
            for fmt in media.formats:
                static = STATIC_PAYLOAD_TYPES.get(int(fmt)) if is_digits(fmt) else None
                if static is not None and fmt not in mapped:
                    out.append(f"a=rtpmap:{fmt} {static.rtpmap}")
                    changed = True
        out.extend(line.text.rstrip() for line in kept[1:])
    return "\r\n".join(out) + "\r\n" if changed else sdp


def _valueless_ssrc(line: str) -> bool:
    """``a=ssrc:<ssrc> <attribute>`` with no ``:<value>``."""
    return line.startswith("a=ssrc:") and ":" not in line[len("a=ssrc:") :]
