"""The per-session noise suppressor (``gateway.media.noise_suppression``) on real signals."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.media.noise_suppression import NoiseSuppressor, suppressor_for

RATE = 16000


def pink(seconds: float, seed: int, rms: float = 1500.0) -> np.ndarray:
    """Seeded pink noise (1/f power), int16 at ``RATE``."""
    n = int(seconds * RATE)
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, n)
    return (noise * rms / np.sqrt(np.mean(noise**2))).astype(np.int16)


def level(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))


@pytest.mark.parametrize("kind", ["near_field", "far_field"])
def test_noise_only_frames_lose_energy(kind: str) -> None:
    noise = pink(3.0, seed=7)
    suppressor = NoiseSuppressor(kind, RATE)
    # 20 ms frames as the inbound reader delivers them; the filter keeps whole 10 ms frames
    out = np.concatenate([suppressor.process(noise[i : i + 320]) for i in range(0, len(noise), 320)])
    assert len(out) == len(noise)
    settled = slice(RATE, None)  # after the first second the noise estimate has converged
    assert level(out[settled]) < 0.5 * level(noise[settled]), (level(out[settled]), level(noise[settled]))


def test_stronger_type_suppresses_more_and_odd_sizes_keep_every_sample() -> None:
    noise = pink(2.0, seed=3)
    near, far = NoiseSuppressor("near_field", RATE), NoiseSuppressor("far_field", RATE)
    sizes = [7, 160, 333, 1, 2000]
    out_near, out_far, start = [], [], 0
    while start < len(noise):
        size = sizes[len(out_near) % len(sizes)]
        out_near.append(near.process(noise[start : start + size]))
        out_far.append(far.process(noise[start : start + size]))
        start += size
    joined_near, joined_far = np.concatenate(out_near), np.concatenate(out_far)
    assert len(noise) - 160 < len(joined_near) <= len(noise)
    assert level(joined_far[RATE:]) < level(joined_near[RATE:])


def test_the_session_keeps_its_suppressor_until_the_type_changes() -> None:
    first = suppressor_for("near_field", None, RATE)
    assert first is not None and suppressor_for("near_field", first, RATE) is first
    changed = suppressor_for("far_field", first, RATE)
    assert changed is not None and changed is not first and changed.kind == "far_field"
    assert suppressor_for(None, changed, RATE) is None
    with pytest.raises(ValueError, match="noise reduction type"):
        NoiseSuppressor("office", RATE)
