"""G.711 companding (ITU-T G.711): µ-law (PCMU) and A-law (PCMA) to and from 16-bit linear PCM.

The algorithms are Sun's public-domain ``g711.c`` (the ITU-T reference's 14-bit µ-law and 13-bit
A-law quantisation, as CPython's ``audioop`` has them; FFmpeg's ``pcm_mulaw`` / ``pcm_alaw`` decode
the same bytes to the same samples): one byte per sample, 8 kHz in telephony and in
the Realtime API's ``audio/pcmu`` / ``audio/pcma`` formats (beta ``g711_ulaw`` / ``g711_alaw``).
Encoding and decoding are table look-ups over numpy arrays (tables built once, at import).
"""

from __future__ import annotations

import numpy as np

_BIAS = 0x84  # µ-law bias (132, on 16-bit samples; 33 on the 14-bit ones it encodes)
_CLIP = 8159  # µ-law clip level of the 14-bit magnitude
_MULAW_SEGMENT_ENDS = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], np.int32)


def _mulaw_encode(linear: np.ndarray) -> np.ndarray:
    pcm = linear.astype(np.int32) >> 2  # µ-law works on 14-bit samples
    mask = np.where(pcm < 0, 0x7F, 0xFF)
    pcm = np.minimum(np.abs(pcm), _CLIP) + (_BIAS >> 2)
    segment = np.searchsorted(_MULAW_SEGMENT_ENDS, pcm)  # first segment whose end is >= pcm
    code = (np.minimum(segment, 7) << 4) | ((pcm >> (segment + 1)) & 0x0F)
    code = np.where(segment >= 8, 0x7F, code)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def _mulaw_decode(codes: np.ndarray) -> np.ndarray:
    u = ~codes.astype(np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + _BIAS) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, _BIAS - t, t - _BIAS).astype(np.int16)


_ALAW_SEGMENT_ENDS = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], np.int32)


def _alaw_encode(linear: np.ndarray) -> np.ndarray:
    pcm = linear.astype(np.int32) >> 3  # A-law works on 13-bit samples
    mask = np.where(pcm >= 0, 0xD5, 0x55)
    pcm = np.where(pcm >= 0, pcm, -pcm - 1)
    segment = np.searchsorted(_ALAW_SEGMENT_ENDS, pcm)  # first segment whose end is >= pcm
    shift = np.where(segment < 2, 1, segment)
    code = (np.minimum(segment, 7) << 4) | ((pcm >> shift) & 0x0F)
    code = np.where(segment >= 8, 0x7F, code)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def _alaw_decode(codes: np.ndarray) -> np.ndarray:
    a = codes.astype(np.int32) ^ 0x55
    t = (a & 0x0F) << 4
    segment = (a & 0x70) >> 4
    t = np.where(segment == 0, t + 8, t + 0x108)
    t = np.where(segment > 1, t << np.maximum(segment - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


_ALL_LINEAR = np.arange(-32768, 32768, dtype=np.int32)
_ALL_CODES = np.arange(256, dtype=np.int32)
_MULAW_FROM_LINEAR = _mulaw_encode(_ALL_LINEAR)  # index: sample + 32768
_ALAW_FROM_LINEAR = _alaw_encode(_ALL_LINEAR)
_LINEAR_FROM_MULAW = _mulaw_decode(_ALL_CODES)  # index: the code byte
_LINEAR_FROM_ALAW = _alaw_decode(_ALL_CODES)


def encode_mulaw(samples: np.ndarray) -> bytes:
    """int16 samples -> µ-law bytes (one per sample)."""
    return _MULAW_FROM_LINEAR[samples.astype(np.int32) + 32768].tobytes()


def decode_mulaw(data: bytes) -> np.ndarray:
    """µ-law bytes -> int16 samples (one per byte)."""
    return _LINEAR_FROM_MULAW[np.frombuffer(data, np.uint8)]


def encode_alaw(samples: np.ndarray) -> bytes:
    """int16 samples -> A-law bytes (one per sample)."""
    return _ALAW_FROM_LINEAR[samples.astype(np.int32) + 32768].tobytes()


def decode_alaw(data: bytes) -> np.ndarray:
    """A-law bytes -> int16 samples (one per byte)."""
    return _LINEAR_FROM_ALAW[np.frombuffer(data, np.uint8)]
