"""The RTP audio codecs the gateway knows, in one table for every transport: payload type, encoding
name, clock rate, channels, and what the gateway does with each (voice, key presses, or nothing),
on which transport, and how (the sample codec of a transport that makes its own RTP).

A transport answers an offered codec when its row names the transport in ``answered_on``:
``"webrtc"`` (aiortc encodes and decodes: ``gateway.transports.webrtc``), ``"sip"`` (plain RTP made
by the gateway: ``gateway.transports.sip``, with the row's ``decoder`` / ``encoder``). The names are
the values of ``gateway.transports.transport.TransportKind``. Both legs read SDP with this table
(``gateway.transports.sdp``): a static payload type listed on an ``m=`` line without ``a=rtpmap``
(RFC 8866 6.6) means the row of that payload type.

Another codec on a transport is one row (or one name added to a row's ``answered_on``, with its
``decoder`` / ``encoder`` for plain RTP); the SDP reader stays as it is.

Sources: RFC 3551 (table 4: static payload types, clock rates; 4.5.2: G.722's RTP clock is 8000 Hz
although it samples at 16 kHz), RFC 7587 (Opus: ``opus/48000/2`` whatever is sent, a 48 kHz RTP clock), RFC 4733
(``telephone-event``: its clock rate is the one of the audio it goes with, 2.1; events 0-15 are the
DTMF digits, 3.2), RFC 7874 5 (WebRTC: Opus and G.711 are mandatory).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np

from gateway.media.g711 import decode_alaw, decode_mulaw, encode_alaw, encode_mulaw
from gateway.media.opus import OpusDecoder, OpusEncoder

WEBRTC = "webrtc"
SIP = "sip"
TELEPHONE_EVENT = "telephone-event"
# The RFC 4733 events this gateway receives: the 16 DTMF digits (3.2), what its answers say in
# ``a=fmtp:<payload type> 0-15`` (7.1.1).
DTMF_EVENTS = "0-15"


class CodecUse(enum.StrEnum):
    """What the gateway does with a codec's packets."""

    VOICE = "voice"  # the caller's speech in, the reply out
    KEY_PRESSES = "key_presses"  # RFC 4733 events in: DTMF key presses
    NONE = "none"  # known (to read an offer that lists its static payload type), never answered


# One stream's sample codec (a new one per stream: Opus keeps state between packets):
PayloadDecoder = Callable[[bytes], np.ndarray]  # one packet's payload -> int16 mono at the row's clock rate
PayloadEncoder = Callable[[np.ndarray], bytes]  # one packet's int16 mono samples (20 ms) -> its payload


@dataclass(frozen=True)
class Codec:
    """One row. ``encoding`` as ``a=rtpmap`` names it (compared without case, RFC 8866 6.6);
    ``clock_rate`` the RTP clock in Hz (None: any, the rate of the voice it goes with: only
    ``telephone-event``); ``channels`` (1 unless the rtpmap says otherwise); ``payload_type`` the
    static one of RFC 3551 (None: dynamic, the offer's number); ``answered_on`` the transports that
    answer it; ``decoder`` and ``encoder`` make one stream's :data:`PayloadDecoder` (payload bytes
    -> int16 mono samples at ``clock_rate``) and :data:`PayloadEncoder` (the reverse), for a
    transport that makes its own RTP; ``fmtp`` the format parameters answered."""

    encoding: str
    clock_rate: Optional[int]
    channels: int = 1
    payload_type: Optional[int] = None
    use: CodecUse = CodecUse.NONE
    answered_on: frozenset[str] = frozenset()
    decoder: Optional[Callable[[], PayloadDecoder]] = None
    encoder: Optional[Callable[[], PayloadEncoder]] = None
    fmtp: Optional[str] = None

    @property
    def rtpmap(self) -> str:
        """The ``a=rtpmap`` value after the payload type: ``PCMU/8000``, ``opus/48000/2``
        (``telephone-event/8000`` for a row of any rate)."""
        text = f"{self.encoding}/{self.clock_rate or 8000}"
        return f"{text}/{self.channels}" if self.channels != 1 else text

    def matches(self, encoding: str, clock_rate: int, channels: int = 1) -> bool:
        """Whether an offered ``encoding/clock_rate[/channels]`` is this codec."""
        return (
            encoding.lower() == self.encoding.lower()
            and self.clock_rate in (None, clock_rate)
            and channels == self.channels
        )


_BOTH = frozenset({WEBRTC, SIP})


def _g711(encoding: str, payload_type: int, decode: PayloadDecoder, encode: PayloadEncoder) -> Codec:
    """A G.711 row (8 kHz, both transports): its sample codec keeps no state, one serves every stream."""
    return Codec(
        encoding,
        8000,
        payload_type=payload_type,
        use=CodecUse.VOICE,
        answered_on=_BOTH,
        decoder=lambda: decode,
        encoder=lambda: encode,
    )


# The WebRTC voice codecs are aiortc's, in its order (tests/transports/webrtc checks it: a new
# aiortc with another codec needs a row here).
CODECS: tuple[Codec, ...] = (
    Codec("opus", 48000, 2, use=CodecUse.VOICE, answered_on=_BOTH, decoder=OpusDecoder, encoder=OpusEncoder),
    Codec("G722", 8000, payload_type=9, use=CodecUse.VOICE, answered_on=frozenset({WEBRTC})),
    _g711("PCMU", 0, decode_mulaw, encode_mulaw),
    _g711("PCMA", 8, decode_alaw, encode_alaw),
    Codec(TELEPHONE_EVENT, 8000, use=CodecUse.KEY_PRESSES, answered_on=_BOTH, fmtp=DTMF_EVENTS),
    Codec(TELEPHONE_EVENT, 48000, use=CodecUse.KEY_PRESSES, answered_on=_BOTH, fmtp=DTMF_EVENTS),  # beside Opus
    # At the rate of a wideband voice codec (Chrome offers 16000, 32000 and 48000 beside 8000).
    Codec(TELEPHONE_EVENT, None, use=CodecUse.KEY_PRESSES, answered_on=frozenset({WEBRTC}), fmtp=DTMF_EVENTS),
    Codec("GSM", 8000, payload_type=3),
    Codec("G723", 8000, payload_type=4),
    Codec("CN", 8000, payload_type=13),
    Codec("G729", 8000, payload_type=18),
)
STATIC_PAYLOAD_TYPES: dict[int, Codec] = {
    codec.payload_type: codec for codec in CODECS if codec.payload_type is not None
}


def find_codec(encoding: str, clock_rate: int, channels: int = 1) -> Optional[Codec]:
    """The first row an offered ``encoding/clock_rate[/channels]`` is, None when none is."""
    return next((codec for codec in CODECS if codec.matches(encoding, clock_rate, channels)), None)


def answered(transport: str, use: CodecUse) -> tuple[Codec, ...]:
    """The rows ``transport`` answers for ``use``, in the table's order."""
    return tuple(codec for codec in CODECS if codec.use is use and transport in codec.answered_on)
