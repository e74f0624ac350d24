"""The SDP answer aiortc made, shaped to the offer before ``setLocalDescription``, and the voice
codec it answers with (:func:`prefer_codec`: Opus when offered).

aiortc answers every offer the same way, whatever it said; three things must follow the offer:

- **BUNDLE**: aiortc always writes ``a=group:BUNDLE`` with the answer's mids, an empty
  ``a=group:BUNDLE `` when the offer has none (a FreeSWITCH leg, an ICE-lite peer). An answer may
  only accept a BUNDLE group that was offered (RFC 8843 7.3): without one, the line goes.
- **proto**: aiortc writes ``UDP/TLS/RTP/SAVPF`` on every RTP m-line; the answer's transport
  protocol must be the offer's (RFC 3264 6, RFC 8829 5.3.1), e.g. ``RTP/SAVPF`` from SIP bridges.
- **DTLS role**: aiortc answers ``a=setup:active`` to ``actpass`` (it is the DTLS client), and as
  a client it offers only ECDHE-ECDSA cipher suites, so a peer with an RSA certificate (GStreamer's
  default, SIP bridges) fails the handshake with "no shared cipher". Answering ``a=setup:passive``
  (RFC 8842 5.3 allows either) makes the peer the client: it offers its suites, aiortc picks an
  ECDSA one for its own certificate, and the peer's RSA certificate is only its client certificate,
  which DTLS-SRTP checks by fingerprint. aiortc takes its role from the answer given to
  ``setLocalDescription``, so shaping the text is enough.
"""

from __future__ import annotations

from aiortc import RTCRtpTransceiver
from aiortc.sdp import SessionDescription

# The voice codec answered first (the one aiortc sends with) when the offer has it anywhere: Opus
# is wideband and loss-tolerant, G.711 is 8 kHz narrowband (RFC 7874 5: both are mandatory).
PREFERRED_AUDIO_CODEC = "opus"

# DTLS-SRTP RTP profiles an answer may echo (RFC 5764 8, RFC 8829 5.1.2: RTP/SAVPF from legacy peers).
_RTP_PROFILES = frozenset({"UDP/TLS/RTP/SAVPF", "TCP/TLS/RTP/SAVPF", "RTP/SAVPF", "UDP/TLS/RTP/SAVP", "RTP/SAVP"})
_SCTP_PROFILES = frozenset({"UDP/DTLS/SCTP", "TCP/DTLS/SCTP", "DTLS/SCTP"})


def shape_answer(answer_sdp: str, offer: SessionDescription) -> str:
    """``answer_sdp`` (from aiortc's ``createAnswer`` for ``offer``) with the BUNDLE group only if
    offered, each m-line's transport protocol as offered, and ``a=setup:passive`` where the offer
    said ``actpass``. m-sections are matched by position, as RFC 3264 pairs them."""
    bundled = any(group.semantic == "BUNDLE" and group.items for group in offer.group)
    out: list[str] = []
    index = -1
    for line in answer_sdp.splitlines():
        if line.startswith("m="):
            index += 1
            line = _with_offered_proto(line, offer, index)
        elif line.startswith("a=group:BUNDLE") and index < 0 and not bundled:
            continue
        elif line == "a=setup:active" and 0 <= index < len(offer.media):
            dtls = offer.media[index].dtls
            if dtls is not None and dtls.role == "auto":  # the offer said actpass
                line = "a=setup:passive"
        out.append(line)
    return "\r\n".join(out) + "\r\n"


def prefer_codec(transceiver: RTCRtpTransceiver, name: str = PREFERRED_AUDIO_CODEC) -> bool:
    """Put ``name`` (e.g. ``opus``) first among ``transceiver``'s negotiated codecs, after
    ``setRemoteDescription`` and before ``createAnswer``: aiortc keeps the offer's order and sends
    with the first, so a bridge offering ``0 8 111`` would get G.711 although it offers Opus. The
    others keep their order. Returns True when the order changed."""
    codecs = getattr(transceiver, "_codecs", None)
    if not isinstance(codecs, list):
        return False
    first = next((i for i, codec in enumerate(codecs) if codec.name.lower() == name.lower()), None)
    if not first:  # None (not offered) or 0 (first already)
        return False
    codecs.insert(0, codecs.pop(first))
    return True


def _with_offered_proto(m_line: str, offer: SessionDescription, index: int) -> str:
    if index >= len(offer.media):
        return m_line
    parts = m_line.split(" ")
    offered = offer.media[index].profile
    known = _RTP_PROFILES if parts[0] in ("m=audio", "m=video") else _SCTP_PROFILES
    if len(parts) >= 4 and parts[2] in known and offered in known and offered != parts[2]:
        parts[2] = offered
    return " ".join(parts)
