"""English text to Kokoro phonemes, offline: misaki (hexgrad's G2P for Kokoro) with nothing fetched at
run time.

What misaki loads when it runs, and where each piece comes from here:

- its pronunciation dictionaries (``us_gold.json``, ``us_silver.json``, ``gb_*``) ship inside the
  ``misaki`` wheel;
- its full English G2P (``misaki.en.G2P``) tags words with the spaCy pipeline ``en_core_web_sm`` and
  calls ``spacy.cli.download`` when that is not installed, a download during a call. It is used only
  when ``en_core_web_sm`` is already installed as a package (``spacy.util.is_package``); it is never
  downloaded here;
- otherwise misaki's espeak-ng G2P (``misaki.espeak.EspeakG2P``, what Kokoro itself uses for the
  languages misaki has no lexicon for) phonemises the text, on the libespeak-ng 1.52 and its data
  that ship inside the ``espeakng-loader`` wheel (no Debian espeak-ng needed), through ``phonemizer``.

espeak-ng keeps process-wide state, so every call holds one lock. Kokoro takes at most
:data:`MAX_PHONEMES` phonemes per inference; longer sentences are split at punctuation, then spaces.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

MAX_PHONEMES = 510  # Kokoro's context is 512 tokens: the phonemes plus a pad at each end
SPACY_MODEL = "en_core_web_sm"

_lock = threading.Lock()  # espeak-ng (and the spaCy pipeline) are not safe to call from two threads
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_sentences(text: str) -> list[str]:
    """``text`` cut after each ``.``, ``!``, ``?`` or ``…`` followed by a space; blanks dropped."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def split_phonemes(phonemes: str, limit: int = MAX_PHONEMES) -> list[str]:
    """``phonemes`` in pieces of at most ``limit`` characters, cut after punctuation where possible,
    else at a space, else anywhere. Blank pieces are dropped."""
    out: list[str] = []
    rest = phonemes.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = max(window.rfind(mark) for mark in ".!?;:,—")
        if cut <= 0:
            cut = window.rfind(" ")
        cut = cut + 1 if cut > 0 else limit
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        out.append(rest)
    return [piece for piece in out if piece]


class EnglishPhonemizer:
    """English (``british`` False: American) text to Kokoro phoneme strings; thread-safe.

    ``kind`` says which G2P serves: ``"misaki"`` (lexicon + spaCy tagger, when ``en_core_web_sm`` is
    installed) or ``"espeak"`` (misaki's espeak-ng G2P). Raises ImportError when misaki or its
    espeak-ng libraries are not installed.
    """

    def __init__(self, british: bool = False) -> None:
        from misaki import espeak  # sets phonemizer to espeakng-loader's library and data

        language = "en-gb" if british else "en-us"
        self._g2p: Callable[[str], tuple]
        if _spacy_model_installed():
            from misaki import en

            fallback = espeak.EspeakFallback(british=british)
            self._g2p = en.G2P(trf=False, british=british, fallback=fallback, unk="")
            self.kind = "misaki"
        else:
            self._g2p = espeak.EspeakG2P(language=language)
            self.kind = "espeak"
        log.info("Kokoro G2P (%s): %s", language, self.kind)

    def __call__(self, text: str) -> list[str]:
        """Phonemes of ``text`` (one sentence or more), in pieces of at most MAX_PHONEMES."""
        with _lock:
            phonemes = self._g2p(text)[0] or ""
        return split_phonemes(" ".join(phonemes.split()))


def _spacy_model_installed() -> bool:
    try:
        import spacy.util
    except ImportError:
        return False
    return bool(spacy.util.is_package(SPACY_MODEL))
