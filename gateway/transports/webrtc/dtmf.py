"""RFC 4733 ``telephone-event`` (DTMF) on an aiortc peer connection: negotiated in the SDP answer
when the offer has it, and its RTP packets received as key presses.

aiortc knows no ``telephone-event``: it leaves it out of the answer, and its RTP router drops
packets of a payload type it did not negotiate. Both are mended here, in this one module, at the
smallest points aiortc has:

- negotiation: after ``setRemoteDescription``, the offered ``telephone-event`` payload types are
  appended to the audio transceiver's negotiated codecs (``RTCRtpTransceiver._codecs``, what
  ``createAnswer`` writes and ``RTCRtpReceiver.receive`` registers with the RTP router), after the
  voice codec, which stays the one aiortc sends with. The answer then carries
  ``a=rtpmap:<pt> telephone-event/<rate>`` and ``a=fmtp:<pt> 0-15`` (RFC 4733 7.1.1: the DTMF
  events this side receives).
- reception: the receiver's ``_handle_rtp_packet`` is wrapped so that packets of those payload
  types go to a :class:`~gateway.media.dtmf.KeyPressDetector` instead of the voice decoder (which
  would fail on them, or drop them).

Sources: RFC 4733 (payload, 7.1 SDP), RFC 3264 (answer lists the payload types the answerer
accepts, with the offer's numbers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiortc import RTCRtpCodecParameters, RTCRtpReceiver, RTCRtpTransceiver
from aiortc.rtp import RtpPacket
from aiortc.sdp import MediaDescription

from gateway.media.codecs import DTMF_EVENTS, TELEPHONE_EVENT, WEBRTC, CodecUse, find_codec
from gateway.media.dtmf import KeyPress, KeyPressDetector

log = logging.getLogger(__name__)


def offered_telephone_events(media: MediaDescription) -> dict[int, int]:
    """The ``telephone-event`` payload types of an offered audio m-section that the codec table
    answers on WebRTC (any clock rate): {payload type: clock rate in Hz} (Chrome offers one at
    48 000 Hz for Opus and one at 8 000 Hz for G.711)."""
    events = {}
    for codec in media.rtp.codecs:
        row = find_codec(codec.name, codec.clockRate, codec.channels or 1)
        if row is not None and row.use is CodecUse.KEY_PRESSES and WEBRTC in row.answered_on:
            if codec.payloadType is not None:
                events[codec.payloadType] = codec.clockRate
    return events


def negotiate_telephone_events(transceiver: RTCRtpTransceiver, offered: MediaDescription) -> dict[int, int]:
    """Accept the offered ``telephone-event`` payload types on ``transceiver`` (after
    ``setRemoteDescription``, before ``createAnswer``). Returns {payload type: clock rate}, empty
    when none was offered or aiortc's negotiated codec list is not where it was (logged once)."""
    events = offered_telephone_events(offered)
    codecs = getattr(transceiver, "_codecs", None)
    if not events or not isinstance(codecs, list) or not codecs:
        if events:
            log.warning("aiortc's transceiver has no negotiated codec list: telephone-event not answered")
        return {}
    for payload_type, clock_rate in events.items():
        codecs.append(
            RTCRtpCodecParameters(
                mimeType=f"audio/{TELEPHONE_EVENT}",
                clockRate=clock_rate,
                channels=1,
                payloadType=payload_type,
                parameters={DTMF_EVENTS: None},
            )
        )
    return events


def receive_telephone_events(
    receiver: RTCRtpReceiver, payload_types: dict[int, int], on_key_press: Callable[[KeyPress], None]
) -> KeyPressDetector:
    """Route ``receiver``'s RTP packets of ``payload_types`` ({payload type: clock rate}) to a new
    KeyPressDetector and call ``on_key_press(press)`` (on the event loop) for each key press.
    Other packets go on to aiortc as before. Returns the detector (its counters)."""
    detector = KeyPressDetector()
    deliver: Callable[..., Any] = receiver._handle_rtp_packet

    async def handle_rtp_packet(packet: RtpPacket, arrival_time_ms: int) -> None:
        clock_rate = payload_types.get(packet.payload_type)
        if clock_rate is None:
            await deliver(packet, arrival_time_ms=arrival_time_ms)
            return
        press = detector.packet(packet.ssrc, packet.timestamp, packet.payload, clock_rate)
        if press is not None:
            try:
                on_key_press(press)
            except Exception:  # a fault of the consumer must not stop the receive path
                log.exception("key press handler failed")

    receiver._handle_rtp_packet = handle_rtp_packet  # type: ignore[method-assign]
    return detector
