"""The one codec table: its WebRTC voice rows are the codecs aiortc answers with, the rows a
transport makes its own RTP of carry their sample codec (G.711 checked against FFmpeg's, Opus
decoded by FFmpeg's own Opus decoder), and ``telephone-event`` is answered at any rate on WebRTC
but only at 8 and 48 kHz (beside G.711 and Opus) on SIP."""

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


def test_every_sip_voice_codec_has_its_sample_codec():
    assert [codec.encoding for codec in answered(SIP, CodecUse.VOICE)] == ["opus", "PCMU", "PCMA"]
    assert all(codec.decoder is not None and codec.encoder is not None for codec in answered(SIP, CodecUse.VOICE))


def test_g711_decodes_as_ffmpeg_does():
    ffmpeg = {"PCMU": "pcm_mulaw", "PCMA": "pcm_alaw"}
    codes = bytes(range(256))
    for pt in (0, 8):
        codec = STATIC_PAYLOAD_TYPES[pt]
        assert codec.decoder is not None and codec.encoder is not None, codec
        context = av.CodecContext.create(ffmpeg[codec.encoding], "r")
        context.sample_rate, context.layout = 8000, "mono"
        frames = context.decode(av.Packet(codes))
        theirs = np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])
        ours = codec.decoder()(codes)
        assert np.array_equal(ours, theirs), codec.encoding
        again = codec.encoder()(ours)
        changed = [code for code in range(256) if again[code] != codes[code]]
        assert changed == ([0x7F] if codec.encoding == "PCMU" else []), changed  # µ-law's -0 becomes +0 (0xFF)


def _tone(hz: float, seconds: float, rate: int = 48000) -> np.ndarray:
    return (np.sin(2 * np.pi * hz * np.arange(int(rate * seconds)) / rate) * 8000).astype(np.int16)


def _loudest_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64)))
    return float(np.argmax(spectrum) * rate / samples.size)


def test_opus_packets_of_the_sip_row_decode_with_ffmpegs_own_decoder_and_back():
    """20 ms packets of the row's encoder (libopus) read by FFmpeg's native Opus decoder (another
    implementation) give the tone back; the row's decoder reads a stereo packet as mono."""
    codec = find_codec("opus", 48000, 2)
    assert codec is not None and SIP in codec.answered_on and codec.decoder and codec.encoder
    encode, decode = codec.encoder(), codec.decoder()
    tone = _tone(440, 1.0)
    packets = [encode(tone[i : i + 960]) for i in range(0, tone.size, 960)]
    assert len(packets) == 50 and all(0 < len(packet) < 200 for packet in packets)  # ~32 kb/s: 80 bytes
    native = av.CodecContext.create("opus", "r")
    native.sample_rate, native.layout = 48000, "mono"
    theirs = 32768 * np.concatenate(  # float samples (fltp)
        [frame.to_ndarray().reshape(-1) for packet in packets for frame in native.decode(av.Packet(packet))]
    )
    ours = np.concatenate([decode(packet) for packet in packets])
    assert ours.size == 48000 and theirs.size >= 47000
    for heard in (ours[4800:], theirs[4800:]):  # past the encoder's start-up
        assert abs(_loudest_hz(heard, 48000) - 440) < 5
        assert 0.5 < np.sqrt(np.mean(heard.astype(np.float64) ** 2)) / (8000 / np.sqrt(2)) < 1.5
    stereo = av.CodecContext.create("libopus", "w")
    stereo.sample_rate, stereo.layout, stereo.format = 48000, "stereo", "s16"
    frame = av.AudioFrame.from_ndarray(np.repeat(tone[:960], 2).reshape(1, -1), format="s16", layout="stereo")
    frame.sample_rate = 48000
    packet = bytes(stereo.encode(frame)[0])
    assert decode(packet).shape == (960,)  # mono, whatever the caller sends
    assert decode(b"\xff\xff\xff not opus").size == 0  # undecodable: nothing, no exception


def test_key_presses_at_any_rate_on_webrtc_and_beside_g711_or_opus_on_sip():
    for rate in (8000, 16000, 32000, 48000):
        codec = find_codec("telephone-event", rate)
        assert codec is not None and codec.use is CodecUse.KEY_PRESSES and WEBRTC in codec.answered_on, rate
        assert (SIP in codec.answered_on) == (rate in (8000, 48000)), rate
        assert codec.fmtp == "0-15"  # the 16 DTMF digits (RFC 4733 3.2)
    assert all(codec.use is CodecUse.NONE for codec in CODECS if not codec.answered_on)
