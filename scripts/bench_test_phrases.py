#!/usr/bin/env python3
"""How surely Whisper base hears the phrases the tests speak: the margin of a test phrase.

    .venv/bin/python scripts/bench_test_phrases.py ["What is the capital of Italy?" ...] [--draws 30]

For each phrase: ``--draws`` syntheses with Piper's default sampled noise (every one different),
and the noise-free test voice (tests/models/speech_fixtures.py) in 9 variants (gain 1, 0.5, 0.25 x
a lead of 0, 10, 20 ms), each heard at 16 kHz (48 kHz test audio resampled, as a WebRTC call) and
through G.711 mu-law at 8 kHz (as a PCMU or g711_ulaw caller), by the gateway's trimmed Whisper
path. Prints how many came out with other words than the phrase, and the wrong transcripts. A
phrase a test asks aloud should be right in all of them. ONNX Runtime is seeded (``--seed``) so a
run repeats: without a seed Piper's noise is drawn from a clock-seeded, process-wide generator.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.config import GatewayConfig
from gateway.media.g711 import decode_mulaw, encode_mulaw
from gateway.media.resample import Resampler

PHRASES = ["What is the capital of Italy?", "What is the capital of France?"]
RATE = 16000


def resample(samples: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    resampler = Resampler(rate_out)
    return np.concatenate([resampler.resample_array(samples, rate_in), resampler.flush()])


def as_turn(samples_16k: np.ndarray) -> np.ndarray:
    """float32 16 kHz: 300 ms before (the VAD's prefix), 250 ms after (the pause that ended it)."""
    audio = samples_16k.astype(np.float32) / 32768.0
    return np.concatenate([np.zeros(int(0.3 * RATE), np.float32), audio, np.zeros(RATE // 4, np.float32)])


def heard(stt, samples_48k: np.ndarray, g711: bool) -> str:
    if g711:
        narrow = decode_mulaw(encode_mulaw(resample(samples_48k, 48000, 8000)))
        return stt.transcribe(as_turn(resample(narrow, 8000, RATE)))
    return stt.transcribe(as_turn(resample(samples_48k, 48000, RATE)))


def words(text: str) -> list[str]:
    return "".join(ch.lower() if ch.isalnum() or ch == "'" else " " for ch in text).split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phrases", nargs="*", default=PHRASES)
    parser.add_argument("--draws", type=int, default=30, help="noisy syntheses per phrase")
    parser.add_argument("--seed", type=int, default=1, help="ONNX Runtime's seed for Piper's noise")
    args = parser.parse_args()
    import onnxruntime

    onnxruntime.set_seed(args.seed)  # before the voices load: their random ops take it then
    from gateway.models.piper_tts import PiperTextToSpeech
    from gateway.models.whisper import WhisperSpeechToText

    config = GatewayConfig()
    noisy = PiperTextToSpeech(config.tts_voice)
    clean = PiperTextToSpeech(config.tts_voice, noise_scale=0.0, noise_w_scale=0.0)
    stt = WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads)

    def speak(tts: PiperTextToSpeech, text: str) -> np.ndarray:
        audio = np.concatenate(list(tts.synthesize(text)))
        return resample(audio, tts.sample_rate, 48000)

    print(f"{'phrase':<40}{'noisy 16k':>11}{'noisy G.711':>13}{'clean 16k':>11}{'clean G.711':>13}  wrong")
    for phrase in args.phrases:
        wrong: dict[str, list[str]] = {"n16": [], "n711": [], "c16": [], "c711": []}
        for _ in range(args.draws):
            samples = speak(noisy, phrase)
            for key, g711 in (("n16", False), ("n711", True)):
                text = heard(stt, samples, g711)
                if words(text) != words(phrase):
                    wrong[key].append(text)
        base = speak(clean, phrase)
        for gain in (1.0, 0.5, 0.25):
            for lead_ms in (0, 10, 20):
                variant = (np.concatenate([np.zeros(48 * lead_ms, np.int16), base]) * gain).astype(np.int16)
                for key, g711 in (("c16", False), ("c711", True)):
                    text = heard(stt, variant, g711)
                    if words(text) != words(phrase):
                        wrong[key].append(text)
        totals = {"n16": args.draws, "n711": args.draws, "c16": 9, "c711": 9}
        counts = [f"{len(wrong[key])}/{total}" for key, total in totals.items()]
        examples = sorted({text for texts in wrong.values() for text in texts})[:3]
        print(f"{phrase:<40}{counts[0]:>11}{counts[1]:>13}{counts[2]:>11}{counts[3]:>13}  {examples}", flush=True)


if __name__ == "__main__":
    main()
