"""The echo reference: a delayed, quieter copy of what was played is recognised as echo (after
G.711, as on a PCMU leg); a different voice over it, or with nothing played, is not."""

from __future__ import annotations

import numpy as np

from gateway.media.echo_reference import EchoReference
from gateway.media.g711 import decode_mulaw, encode_mulaw

RATE = 48000
FRAME = 960


def voice_like(seconds: float, seed: int) -> np.ndarray:
    """Noise shaped like speech (low-passed, syllable-rate envelope), int16 48 kHz."""
    rng = np.random.default_rng(seed)
    noise = np.convolve(rng.normal(0, 1, int(seconds * RATE)), np.ones(12) / 12, "same")
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * np.arange(noise.size) / RATE + seed)
    return np.clip(noise * envelope * 8000, -32768, 32767).astype(np.int16)


def played(reference: EchoReference, clock: list[float], audio: np.ndarray) -> None:
    for start in range(0, audio.size - FRAME + 1, FRAME):
        clock[0] += 0.02
        reference.record(audio[start : start + FRAME], audible=True)


def heard_at_16k(audio_48k: np.ndarray) -> np.ndarray:
    return audio_48k[::3].astype(np.float32) / 32768.0


def test_delayed_quieter_copy_is_echo_and_a_voice_over_it_is_not() -> None:
    clock = [100.0]
    reference = EchoReference(clock=lambda: clock[0])
    reply = voice_like(2.0, seed=1)
    played(reference, clock, reply)
    delay = int(0.15 * RATE)
    window = slice(reply.size - delay - 12288, reply.size - delay)  # 256 ms heard 150 ms late
    echo = (reply[window] * 10 ** (-15 / 20)).astype(np.int16)
    echo = decode_mulaw(encode_mulaw(echo[::6]))  # through an 8 kHz PCMU leg
    echo_16k = np.repeat(echo, 2).astype(np.float32) / 32768.0
    assert reference.echo_share(echo_16k, clock[0]) > 0.6
    caller = heard_at_16k(voice_like(0.256, seed=2))
    assert reference.echo_share(caller + echo_16k, clock[0]) < 0.6
    assert reference.echo_share(caller, clock[0]) < 0.3


def test_nothing_played_recently_means_no_echo() -> None:
    clock = [100.0]
    reference = EchoReference(clock=lambda: clock[0])
    reply = voice_like(1.0, seed=1)
    played(reference, clock, reply)
    copy = heard_at_16k(reply[-12288:])
    clock[0] += 2.0  # the reply ended 2 s ago
    assert reference.echo_share(copy, clock[0]) == 0.0
