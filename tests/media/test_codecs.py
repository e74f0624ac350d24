"""The one codec table: its WebRTC voice rows are the codecs aiortc answers with, the rows a
transport makes plain RTP of carry their sample codec (checked against FFmpeg's), and
``telephone-event`` is answered at any rate on WebRTC but only at 8 kHz on SIP."""

from __future__ import annotations

import av
import numpy as np
from aiortc.codecs import CODECS as AIORTC_CODECS

from gateway.media.codecs import CODECS, SIP, STATIC_PAYLOAD_TYPES, WEBRTC, CodecUse, answered, find_codec


def test_the_webrtc_voice_rows_are_aiortcs_codecs_in_its_order():
    rows = [(c.encoding.lower(), c.clock_rate, c.channels) for c in answered(WEBRTC, CodecUse.VOICE)]
    theirs = [(c.mimeType.split("/")[1].lower(), c.clockRate, c.channels or 1) for c in AIORTC_CODECS["audio"]]
    assert rows == theirs


def test_static_payload_types_are_rfc_3551s():
    assert {pt: codec.rtpmap for pt, codec in STATIC_PAYLOAD_TYPES.items()} == {
        0: "PCMU/8000",
        3: "GSM/8000",
        4: "G723/8000",
        8: "PCMA/8000",
        9: "G722/8000",
        13: "CN/8000",
        18: "G729/8000",
    }
    assert find_codec("pcmu", 8000) is STATIC_PAYLOAD_TYPES[0]  # encoding names are compared without case
    assert find_codec("PCMU", 16000) is None and find_codec("PCMU", 8000, 2) is None


def test_every_plain_rtp_voice_codec_decodes_as_ffmpeg_does():
    ffmpeg = {"PCMU": "pcm_mulaw", "PCMA": "pcm_alaw"}
    codes = bytes(range(256))
    sip_voice = answered(SIP, CodecUse.VOICE)
    assert [codec.encoding for codec in sip_voice] == ["PCMU", "PCMA"]
    for codec in sip_voice:
        assert codec.decode is not None and codec.encode is not None, codec
        context = av.CodecContext.create(ffmpeg[codec.encoding], "r")
        context.sample_rate, context.layout = 8000, "mono"
        frames = context.decode(av.Packet(codes))
        theirs = np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])
        ours = codec.decode(codes)
        assert np.array_equal(ours, theirs), codec.encoding
        again = codec.encode(ours)
        changed = [code for code in range(256) if again[code] != codes[code]]
        assert changed == ([0x7F] if codec.encoding == "PCMU" else []), changed  # µ-law's -0 becomes +0 (0xFF)


def test_key_presses_at_any_rate_on_webrtc_and_at_8_khz_on_sip():
    for rate in (8000, 16000, 32000, 48000):
        codec = find_codec("telephone-event", rate)
        assert codec is not None and codec.use is CodecUse.KEY_PRESSES and WEBRTC in codec.answered_on, rate
        assert (SIP in codec.answered_on) == (rate == 8000), rate
        assert codec.fmtp == "0-15"  # the 16 DTMF digits (RFC 4733 3.2)
    assert all(codec.use is CodecUse.NONE for codec in CODECS if not codec.answered_on)
