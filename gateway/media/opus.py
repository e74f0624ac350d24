"""Opus (RFC 6716) for a transport that makes its own RTP: libopus through PyAV, one encoder and one
decoder per stream (Opus keeps state from packet to packet).

RTP carries Opus at a 48 kHz clock whatever the audio bandwidth (RFC 7587 4.1, ``opus/48000/2`` in
SDP). The encoder takes 20 ms of int16 mono at 48 kHz (960 samples) and makes one packet of about
:data:`BIT_RATE` (VoIP mode: speech); mono is always allowed, whatever the peer's ``stereo``
preference (RFC 7587 7.1: it is the receiver's preference, a sender may send mono). The decoder
takes any Opus packet (2.5 to 120 ms, mono or stereo) and gives int16 mono at 48 kHz (libopus
mixes stereo down).
"""

from __future__ import annotations

import fractions

import av
import numpy as np

CLOCK_RATE = 48000  # RFC 7587 4.1: the RTP clock and the decoder's output rate
FRAME_SAMPLES = 960  # 20 ms at 48 kHz: what :class:`OpusEncoder` takes per packet
BIT_RATE = 32000  # bit/s: wideband speech at a telephone leg's cost (RFC 7587 3.1.1: 12-20+ kb/s for speech)


class OpusEncoder:
    """``encoder(samples)``: :data:`FRAME_SAMPLES` int16 mono samples at 48 kHz -> one Opus packet
    (bytes). Raises ValueError for another number of samples."""

    def __init__(self, bit_rate: int = BIT_RATE) -> None:
        self._context = av.CodecContext.create("libopus", "w")
        self._context.sample_rate = CLOCK_RATE
        self._context.layout = "mono"
        self._context.format = "s16"
        self._context.bit_rate = bit_rate
        self._context.time_base = fractions.Fraction(1, CLOCK_RATE)
        self._context.options = {"application": "voip"}
        self._pts = 0

    def __call__(self, samples: np.ndarray) -> bytes:
        if samples.size != FRAME_SAMPLES:
            raise ValueError(f"Opus packets here are 20 ms: {FRAME_SAMPLES} samples, not {samples.size}")
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(samples, np.int16).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = CLOCK_RATE
        frame.pts = self._pts
        self._pts += FRAME_SAMPLES
        return b"".join(bytes(packet) for packet in self._context.encode(frame))


class OpusDecoder:
    """``decoder(payload)``: one Opus packet -> int16 mono samples at 48 kHz (an empty array for a
    packet libopus cannot decode: ``undecodable`` counts those)."""

    def __init__(self) -> None:
        self._context = av.CodecContext.create("libopus", "r")
        self._context.sample_rate = CLOCK_RATE
        self._context.layout = "mono"
        self._context.format = "s16"
        self.undecodable = 0

    def __call__(self, payload: bytes) -> np.ndarray:
        if not payload:  # an empty packet would drain the decoder, not decode
            return np.zeros(0, np.int16)
        try:
            frames = self._context.decode(av.Packet(payload))
        except av.FFmpegError:
            self.undecodable += 1
            return np.zeros(0, np.int16)
        if not frames:
            return np.zeros(0, np.int16)
        return np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames]).astype(np.int16, copy=False)
