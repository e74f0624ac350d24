"""The words a transcript is about, for comparing what was heard or said with what was meant (the
load generator's mix-up check, ``gateway.loadgen.mixups``; the tests' ``says``): lower-case words,
Whisper's spelling variants made one (contractions split, possessives dropped, small numbers
spelled out, "ok" as "okay"), and the words that carry no content of their own left out."""

from __future__ import annotations

import re

# Words that carry no content of their own (articles, pronouns, auxiliaries, prepositions, question
# words): a transcript that shares only these with a sentence did not hear it.
STOP_WORDS = frozenset(
    """a an the and or but if of to in on at by for from with about as into over under up out than then so too
    very just also please is am are was were be been being do does did have has had will would can could shall
    should may might must i me my mine we us our you your yours he him his she her it its they them their this
    that these those there here what which who whom whose when where why how""".split()
)
_NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()
# Whisper writes contractions either way: "What's" is "what is", "Italy's" is "italy".
_CONTRACTIONS = {"won't": ("will", "not"), "can't": ("can", "not"), "shan't": ("shall", "not")}
_SUFFIXES = {"n't": "not", "'re": "are", "'m": "am", "'ll": "will", "'ve": "have", "'d": "would", "'s": ""}
_SPELLINGS = {"ok": "okay"}


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters, digits, apostrophes), in order."""
    return re.findall(r"[a-z0-9']+", text.lower())


def normal_words(text: str) -> list[str]:
    """:func:`words` with Whisper's usual variants made one: contractions split ("what's" ->
    "what is"), possessives dropped, small numbers spelled out ("7" -> "seven"), "ok" -> "okay"."""
    found: list[str] = []
    for word in words(text):
        word = word.strip("'")
        if word in _CONTRACTIONS:
            found += _CONTRACTIONS[word]
            continue
        suffix = next((end for end in _SUFFIXES if word.endswith(end) and len(word) > len(end)), None)
        if suffix is not None:
            word, extra = word[: -len(suffix)], _SUFFIXES[suffix]
            found += [w for w in (word, extra) if w]
            continue
        if word.isdigit() and int(word) < len(_NUMBERS):
            word = _NUMBERS[int(word)]
        found.append(_SPELLINGS.get(word, word))
    return found


def content_words(text: str, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """The words of ``text`` that are not ``stop_words`` (default :data:`STOP_WORDS`), normalised
    as Whisper varies them (:func:`normal_words`), in order, once each."""
    return list(dict.fromkeys(w for w in normal_words(text) if w and w not in stop_words))
