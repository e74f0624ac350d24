"""``audio.input.noise_reduction`` in a real WebRTC call: the same noisy question, heard with and
without ``near_field`` suppression, by the real VAD and Whisper base.

The noise is the office noise of ``scripts/bench_noise.py``, seeded: babble of three other
sentences of the bundled voice (looped, seeded offsets and gains) plus pink noise at equal power,
at 0 dB SNR against the question's voiced level, from 1 s before it to 0.5 s after it. The turn is
manual (``input_audio_buffer.commit``), so only suppression differs between the two calls; both
hear the very same samples.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from gateway.client import RealtimeClient
from tests.helpers import says, serve, wait_until, words

QUESTION = "Feels like these days go on forever."
RATE = 48000


def pink(n: int, seed: int) -> np.ndarray:
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, n)
    return noise / np.sqrt(np.mean(noise**2))


BABBLE = [
    "The quarterly numbers are due on Friday, so let's meet before lunch.",
    "I sent the slides to Maria but she hasn't answered yet.",
    "Does anyone know where the printer on the third floor went?",
]


def office(n: int, talkers: list[np.ndarray], seed: int) -> np.ndarray:
    """Unit-RMS babble of ``talkers`` plus pink noise, equal power, ``n`` samples."""
    rng = np.random.default_rng(seed)
    babble = np.zeros(n)
    for talker in talkers:
        looped = np.tile(talker.astype(np.float64), n // len(talker) + 2)
        start = int(rng.integers(0, len(talker)))
        babble += looped[start : start + n] * rng.uniform(0.5, 1.0)
    babble /= np.sqrt(np.mean(babble**2))
    return (babble + pink(n, seed)) / np.sqrt(2)


def noisy(speech: np.ndarray, talkers: list[np.ndarray], snr_db: float, seed: int = 20) -> np.ndarray:
    """int16 48 kHz: 1 s of noise, the speech under noise, 0.5 s of noise."""
    clean = np.concatenate([np.zeros(RATE), speech.astype(np.float64), np.zeros(RATE // 2)])
    voiced = speech[np.abs(speech) > 300].astype(np.float64)
    level = np.sqrt(np.mean(voiced**2)) / 10 ** (snr_db / 20)
    return np.clip(clean + office(len(clean), talkers, seed=seed) * level, -32768, 32767).astype(np.int16)


async def transcript(url: str, audio: np.ndarray, noise_reduction: dict | None) -> str:
    client = RealtimeClient(url)
    session = {
        "type": "realtime",
        "output_modalities": ["text"],
        "audio": {"input": {"turn_detection": None, "noise_reduction": noise_reduction}},
    }
    assert await client.connect(session=session) == 201
    shown = client.of_type("session.updated")[-1]["session"]["audio"]["input"]
    assert shown["noise_reduction"] == noise_reduction
    mark = len(client.events)
    client.say(audio)
    assert await wait_until(lambda: not client.mic.speaking, timeout=30)
    await asyncio.sleep(0.3)  # the last frames reach the gateway
    client.send({"type": "input_audio_buffer.commit"})
    done = await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=60, after=mark)
    await client.hangup()
    return str(done["transcript"])


@pytest.mark.slow  # ~15-20 s: the default suite stays under its 10 minutes
async def test_near_field_suppression_changes_what_is_heard_and_keeps_the_speech(
    models, gateway_config, speech, monkeypatch
):
    """The same samples heard with and without ``near_field``: at 0 dB SNR Whisper hears other
    words with it (the suppression is applied in the call, the only difference between the two);
    at 10 dB both calls hear the question (it keeps the speech).

    Whether it hears better is measured by ``scripts/bench_noise.py`` over many utterances, not
    here: one sample is decided by how the CPU rounds. This test asserted it did on seed 20 at 0 dB
    (AVX2 boxes: WER 1.86 without, 1.43 with); on an AVX-512 box the same samples gave 1.00 without,
    1.43 with, and near_field heard three seeds worse at 0, 5 and 10 dB (stop 48)."""
    # Whisper hears the whole turn, so that only suppression differs (no caller-voice cut, no word
    # dropped as unsure).
    monkeypatch.setattr(models.stt, "caller_voice", False)
    monkeypatch.setattr(models.stt, "min_word_probability", 0.0)
    talkers = [speech(text) for text in BABBLE]
    question = speech(QUESTION)
    async with serve(gateway_config(), models) as (url, _app):
        heard = {}
        for snr_db in (0.0, 10.0):
            audio = noisy(question, talkers, snr_db=snr_db)
            heard[snr_db] = (await transcript(url, audio, None), await transcript(url, audio, {"type": "near_field"}))
    print(f"\n{heard}")
    assert words(heard[0.0][0]) != words(heard[0.0][1]), heard[0.0]
    assert all(says(text, QUESTION) for text in heard[10.0]), heard[10.0]
