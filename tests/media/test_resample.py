"""PyAV resampling: 48 kHz stereo (aiortc's Opus output) -> 16 kHz mono keeps duration and content."""

import av
import numpy as np

from gateway.media.resample import Resampler


def tone(freq: float, rate: int, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t) * 32767).astype(np.int16)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64) * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[spectrum.argmax()])


def stereo_frames(mono: np.ndarray, rate: int, frame: int) -> list[av.AudioFrame]:
    frames = []
    for start in range(0, mono.size, frame):
        chunk = mono[start : start + frame]
        interleaved = np.repeat(chunk, 2).reshape(1, -1)  # packed s16 stereo: L R L R ...
        f = av.AudioFrame.from_ndarray(interleaved, format="s16", layout="stereo")
        f.sample_rate = rate
        frames.append(f)
    return frames


def test_48k_stereo_to_16k_mono_keeps_duration_and_pitch():
    source = tone(440.0, 48000, 2.0)
    resampler = Resampler(16000)
    out = np.concatenate([resampler.resample_frame(f) for f in stereo_frames(source, 48000, 960)] + [resampler.flush()])
    assert out.dtype == np.int16
    assert abs(out.size - 32000) <= 32  # 2 s at 16 kHz, within the filter's delay
    assert abs(dominant_frequency(out[1000:], 16000) - 440.0) < 5.0
    # Amplitude is kept (no channel summing overflow, no halving).
    assert 0.4 * 32767 < np.abs(out[1000:-1000]).max() < 0.6 * 32767


def test_resampling_is_continuous_across_20ms_frames():
    """A stateful resampler has no clicks at frame edges: the output is as smooth as the input."""
    source = tone(300.0, 48000, 1.0)
    resampler = Resampler(16000)
    out = np.concatenate([resampler.resample_frame(f) for f in stereo_frames(source, 48000, 960)]).astype(np.float64)
    steps = np.abs(np.diff(out[200:]))
    max_step = 0.5 * 32767 * 2 * np.pi * 300 / 16000  # largest sample-to-sample change of the sine
    assert steps.max() < 1.1 * max_step


def test_float_array_upsampled_for_the_track():
    source = tone(1000.0, 22050, 0.5).astype(np.float32) / 32768.0
    resampler = Resampler(48000)
    out = np.concatenate([resampler.resample_array(source, 22050), resampler.flush()])
    assert abs(out.size - 24000) <= 48
    assert abs(dominant_frequency(out, 48000) - 1000.0) < 5.0


def test_pcmu_rate_input_is_accepted():
    """8 kHz mono (a G.711 leg) resamples up to the VAD's 16 kHz."""
    resampler = Resampler(16000)
    f = av.AudioFrame.from_ndarray(tone(400.0, 8000, 0.02).reshape(1, -1), format="s16", layout="mono")
    f.sample_rate = 8000
    out = np.concatenate([resampler.resample_frame(f) for _ in range(50)])
    assert abs(out.size - 16000) <= 64
