"""Which words of a barge-in probe are backchannels ("okay", "mm-hmm": I am listening) and which ask
for the turn ("wait", "stop"): the word test of ``gateway.pipeline.bargein``.

A list per language (:data:`LANGUAGES`: words, phrases, the first words of phrases) plus the
*sounds* people make while listening, matched by shape whatever their spelling (:data:`VOCABLES`:
"mm", "mhm", "uh-huh", "aha", "yeah", "yahoo", "okay", "kay"). The match is fuzzy because Whisper
base writes backchannels of unfamiliar voices in odd ways ("Mm-hmm" -> "Hmm" or "M M M", "Uh-huh" ->
"Oh,", "Yeah, yeah" -> "YAHO YAHO", "Got it" -> "God it"): each word is compared in a *canonical*
form (lower case, letters and digits only, every run of one letter written once: "Mmm-hmm" -> "mhm"), a list
word of four letters or more also matches at one edit ("yeh" for "yeah"), and a phrase matches when
each of its words does or when its words written together do ("Ice" for "I see").

The probabilities of the words decide the rest (:func:`interrupting_words`): a word that is no
backchannel counts only when the decoder was fairly sure of it (``min_probability``), since
Whisper's guesses at a sound it does not know are unsure words ("Chair", "Xion"); while the caller
is still speaking, the last word may be a cut-off piece of a longer one and needs more
(``trailing_probability``); a last word that begins a backchannel phrase ("I" of "I see") does not
count. Words Whisper writes for noise or breath ("you", "bye") never count.

Beyond the list, :func:`judge` decides by the *shape* of what was heard, for the backchannels Whisper
writes as other words it may be sure of ("Always" for "Oh, I see", "I made" for "Mhm, right"):
words off the list are a backchannel still when they are few (:data:`SHAPE_MAX_WORDS` different
words above Whisper's noise guesses), the voiced speech short (:data:`SHAPE_MAX_MS`), with no
question mark and no *cue*: a word that asks for the turn in any sentence (negation, stop, a
question word or auxiliary, an apology or "but", a number; ``Backchannels.cues``, English only). A
cue counts even when unsure once the speech is long enough ("Wait" at p 0.35 under the assistant's
echo): unsure words that are neither a backchannel nor of its shape never keep the answer going.
The shape rule was designed on the corpus's tuning, held-out and first fresh sets
(``scripts/bargein_corpus.py``) and judged once on its second fresh set (``docs/BENCHMARKS.md``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

from gateway.models.base import HeardWord

# The word a probe needs to be sure of to count it, 0..1; the last word of speech still going on.
MIN_PROBABILITY = 0.4
TRAILING_PROBABILITY = 0.6
# A cue word counts from CUE_SURE; from NOISE_PROBABILITY (Whisper's guesses at a noise are below
# it) once UNSURE_CUE_MS of speech were voiced, as long as it is not the last word of speech still
# going on (a one-syllable backchannel is short: "Right." heard as "Wait" at 0.39, 490 ms).
CUE_SURE = 0.5
NOISE_PROBABILITY = 0.2
UNSURE_CUE_MS = 600
# A command word (``Backchannels.commands``: a cue no backchannel was heard as) counts from this
# probability, also as the last word of speech still going on: the first probes hear a command said
# in a voice Whisper knows badly unsure ("Stop" 0.45, "Excuse" 0.36-0.49, "Hold" 0.31), sure only
# 200-400 ms later (h51). Whisper's guesses at a noise stay below NOISE_PROBABILITY.
COMMAND_SURE = 0.3
# The shape of a backchannel off the list: at most this many words off it, this much voiced speech (ms).
SHAPE_MAX_WORDS = 2
SHAPE_MAX_MS = 1300
# A word two probes in a row heard at the same place (the words before it the same too, compared in
# canonical form) counts from this probability, whatever either decode said: a word Whisper writes
# again as the speech grows is no guess at a noise (the "local agreement" of successive hypotheses
# that streaming Whisper commits text by). Unsure but agreed: "No" 0.36, 0.34 for "No, that's
# wrong." (decided at 937 ms, by its third word; h49). 0: off.
AGREED_PROBABILITY = 0.5
# Different sure words off the list that interrupt speech still going on (a backchannel Whisper
# misspells is mostly one sure word: "Always", "Yasuo").
SURE_WORDS = 2

# Sounds of listening, matched on the canonical form (lower case letters, runs written once).
VOCABLES = re.compile(
    r"^(?:"
    r"[aoue]?h?m?h?m?"  # m, hm, mhm, um, uh, oh, ah, uhm (and "mm", "hmm", "mmhmm" once canonical)
    r"|m?(?:hm){2,3}"  # mhmhm, hmhm: the sound repeated ("M.M.H.M.H.M" once its dots are gone)
    r"|h?[aou]h?[aou]?h?"  # huh, aha, oho, ha, ho
    r"|(?:[aou]h){1,3}|(?:h[aou]){1,3}h?"  # uhuh, ahah, haha
    r"|y[ea][aeiou]?h?[aeiou]?h?"  # ya, yah, yea, yeah, yeh, yaho ("yahoo"), yehe
    r"|y[eau]p"  # yep, yup, yap
    r"|o?h?k[aeiy]*|m?k[ae]y?"  # ok, okay, kay, oke, okey, ohkay, mkay
    r")$"
)


# Whisper's rendering of a sound with no words: "(coughs)", "[Music]", "*sigh*".
_NON_SPEECH = re.compile(r"\([^)]*\)|\[[^\]]*\]|\*[^*]*\*")
_SPLIT = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_RUNS = re.compile(r"(.)\1+")


def split_words(text: str) -> list[str]:
    """The words of ``text``, lower case, split at spaces, hyphens and punctuation ("that's" is one)."""
    return _SPLIT.findall(_NON_SPEECH.sub(" ", text).lower())


def canonical(word: str) -> str:
    """Lower case, letters and digits only, each run of one letter written once: "Mmm-hmm" -> "mhm"."""
    letters = "".join(ch for ch in word.lower() if ch.isalnum())
    return _RUNS.sub(r"\1", letters)


def edit_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Levenshtein distance of two short sequences (letters of words, or words of texts)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _near(heard: str, listed: str) -> bool:
    """``heard`` is ``listed`` or, for a listed word of 4 letters or more, one edit from it."""
    return heard == listed or (len(listed) >= 4 and edit_distance(heard, listed) <= 1)


@dataclass(frozen=True)
class Backchannels:
    """One language's list: ``words`` (single-word backchannels), ``phrases`` (of two or more
    words), ``noise`` (what the STT writes for a breath or a noise), ``cues`` (words that ask for
    the turn), ``cue_spellings`` (what the STT writes for a cue word said in a voice it hears
    badly: "weight" for "Wait"; matched exactly, never fuzzily: a backchannel never holds one) and
    ``commands`` (cue words that ask to stop and that the STT never wrote for a backchannel: they
    count from :data:`COMMAND_SURE`; exact words, not their spellings). Written naturally; matched
    in canonical form (the cached ``*_forms``)."""

    words: tuple[str, ...]
    phrases: tuple[str, ...] = ()
    noise: tuple[str, ...] = ()
    cues: tuple[str, ...] = ()
    cue_spellings: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()

    @cached_property
    def cue_forms(self) -> frozenset[str]:
        """Words that ask for the turn in any sentence, and the STT's usual spellings of them,
        canonical (:func:`judge`)."""
        return frozenset(canonical(word) for word in (*self.cues, *self.cue_spellings))

    @cached_property
    def command_forms(self) -> frozenset[str]:
        return frozenset(canonical(word) for word in self.commands)

    @cached_property
    def word_forms(self) -> frozenset[str]:
        return frozenset(canonical(word) for word in (*self.words, *self.noise))

    @cached_property
    def phrase_forms(self) -> tuple[tuple[str, ...], ...]:
        """The phrases in canonical form, longest first."""
        phrases = (tuple(canonical(word) for word in split_words(phrase)) for phrase in self.phrases)
        return tuple(sorted(phrases, key=len, reverse=True))

    @cached_property
    def lead_forms(self) -> frozenset[str]:
        """The first words of the phrases: a cut-off "I" may become "I see"."""
        return frozenset(phrase[0] for phrase in self.phrase_forms)


ENGLISH = Backchannels(
    words=(
        "yeah", "yes", "yep", "yup", "yea", "ya", "okay", "ok", "right", "sure", "alright", "cool", "nice",
        "great", "good", "fine", "wow", "true", "exactly", "totally", "absolutely", "definitely", "indeed",
        "gotcha", "perfect", "awesome", "interesting", "agreed", "correct", "certainly", "really", "lovely",
        "uh-huh", "mm-hmm", "mhm", "aha",
    ),
    phrases=(
        "i see", "got it", "all right", "of course", "makes sense", "that's right", "that's true",
        "i know", "i understand", "sounds good", "fair enough", "oh my", "thank you",
        "go on", "keep going", "carry on", "go ahead",  # continuers: "Uh-huh, go on." asks for more of the answer
        "uh huh", "mm hmm", "oh okay", "oh yeah", "oh right", "oh i see",
    ),
    noise=("you", "bye", "thanks"),
    cues=(
        "no", "not", "never", "nope", "nothing", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't",
        "can't", "cannot", "won't", "wouldn't", "shouldn't", "stop", "wait", "hold", "hang", "pause", "enough",
        "quiet", "shut", "what", "who", "whom", "whose", "where", "when", "why", "how", "which", "can", "could",
        "would", "will", "should", "shall", "may", "might", "do", "does", "did", "is", "are", "was", "sorry",
        "excuse", "pardon", "actually", "but", "however", "hey", "listen", "instead",
    ),
    # Whisper base's spellings of "wait", "stop", "hold (on)" and "no" in the tuning voices' probes
    # (scripts/bargein_corpus.py, clean and over the assistant's echo; "weight" 0.41-0.83 in real
    # calls, tests/pool/test_bargein_words.py): "Whiz" 0.16-0.41 for "Wait"; "Stove", "Stalk",
    # "start", "style" 0.13-0.51 for "stop"; "Holder" 0.45-0.54 for "Hold"; "nose" 0.34-0.53 for
    # "no". No backchannel probe of those voices held any of them. Left out: spellings below the
    # noise floor ("with", "Wear", "Boyd"), and common words a backchannel may be heard as ("we",
    # "note": "Noted.").
    cue_spellings=("weight", "whiz", "stove", "stalk", "start", "style", "holder", "nose"),
    # The cues no backchannel probe held at any probability (every voice and split of
    # scripts/bargein_corpus.py, two-part clips included, h51). Left out: the cues backchannels are
    # heard as, unsure: "no" ("Nice." -> "No" 0.40-0.51), "wait" ("Right." -> "Wait" 0.28-0.42),
    # "what" ("Right.", "Uh-huh." -> "What" 0.10-0.53), "actually" (next to "exactly"), numbers;
    # and "enough", a word of the phrase "fair enough" ("Fair enough." -> "Very enough" 0.38-0.49).
    commands=("stop", "hold", "hang", "excuse", "pause", "quiet", "shut"),
)  # fmt: skip
LANGUAGES: dict[str, Backchannels] = {
    "en": ENGLISH,
    "es": Backchannels(
        ("sí", "si", "vale", "claro", "ajá", "bueno", "exacto", "ya", "okay", "cierto", "perfecto", "sigue"),
        ("de acuerdo", "ya veo", "claro que sí", "está bien", "adelante"),
    ),
    "fr": Backchannels(
        ("oui", "ouais", "ok", "okay", "voilà", "exactement", "d'accord", "effectivement", "bon", "bien", "continuez"),
        ("ah bon", "bien sûr", "je vois", "c'est ça", "tout à fait", "vas-y", "allez-y"),
    ),
    "de": Backchannels(
        ("ja", "genau", "okay", "stimmt", "richtig", "klar", "achso", "gut", "jawohl", "sicher", "eben", "weiter"),
        ("ach so", "alles klar", "ich verstehe", "na klar", "mach weiter", "erzähl weiter"),
    ),
    "ja": Backchannels(
        ("はい", "うん", "ええ", "そう", "なるほど", "そうですね", "そうか", "へえ", "ふーん", "確かに")
    ),
}


def _phrase_at(forms: list[str], start: int, table: Backchannels) -> int:
    """How many words from ``start`` form a backchannel phrase (0: none)."""
    for phrase in table.phrase_forms:  # longest first
        heard = forms[start : start + len(phrase)]
        joined = "".join(phrase)
        if (
            len(heard) == len(phrase)
            and all(edit_distance(h, p) <= (0 if len(p) < 2 else 1) for h, p in zip(heard, phrase, strict=True))
            and edit_distance("".join(heard), joined) <= len(joined) // 2
        ):
            return len(phrase)
        if len(joined) >= 3 and _near(forms[start], joined):  # written as one word: "ice", "alright"
            return 1
    return 0


def _is_backchannel_word(form: str, table: Backchannels) -> bool:
    if form in table.word_forms or VOCABLES.match(form):
        return True
    return any(_near(form, listed) for listed in table.word_forms if len(listed) >= 4)


def _table(language: str) -> Backchannels:
    return LANGUAGES.get(language.split("-")[0].lower(), ENGLISH)


@dataclass(frozen=True)
class _Heard:
    """One piece of a word off the list: its text, canonical form, probability, whether it is the
    last piece heard, and its whole word's canonical form."""

    piece: str
    form: str
    probability: float
    last: bool
    word: str  # the canonical form of the whole word it is a piece of ("oic" for "O-I-C")


def _off_list(words: Sequence[HeardWord] | str, table: Backchannels) -> list[_Heard]:
    """The pieces of ``words`` that are no backchannel word, phrase, sound or noise, in order."""
    if isinstance(words, str):
        words = [HeardWord(word) for word in words.split()]
    pieces = [(piece, word.probability, canonical(word.text)) for word in words for piece in split_words(word.text)]
    forms = [canonical(piece[0]) for piece in pieces]
    left: list[_Heard] = []
    index = 0
    while index < len(pieces):
        span = _phrase_at(forms, index, table) or _sound_at(forms, index, table)
        if span:
            index += span
            continue
        form = forms[index]
        if form and not _is_backchannel_word(form, table):
            piece, probability, whole = pieces[index]
            left.append(_Heard(piece, form, probability, index == len(pieces) - 1, whole))
        index += 1
    return left


def interrupting_words(
    words: Sequence[HeardWord] | str,
    language: str = "en",
    *,
    complete: bool = True,
    min_probability: Optional[float] = None,
    trailing_probability: Optional[float] = None,
) -> list[str]:
    """The words that ask for the turn, lower case, in order: those that are no backchannel, sound
    or noise and that the decoder was sure of (``min_probability``; a plain text counts every word
    as sure; None: :data:`MIN_PROBABILITY`, :data:`TRAILING_PROBABILITY`). ``complete`` False (the
    caller is still speaking): the last word must be surer (``trailing_probability``). A last word
    that begins a backchannel phrase ("I", "got") never counts. ``language``: an ISO 639-1 code;
    one without a list uses English's (the sounds are the same)."""
    table = _table(language)
    sure = MIN_PROBABILITY if min_probability is None else min_probability
    surer = TRAILING_PROBABILITY if trailing_probability is None else trailing_probability
    return [
        heard.piece
        for heard in _off_list(words, table)
        if heard.probability >= (surer if heard.last and not complete else sure)
        and not (heard.last and heard.form in table.lead_forms)
    ]


def agreed(before: Sequence[HeardWord], now: Sequence[HeardWord]) -> tuple[HeardWord, ...]:
    """``now`` (a probe's words) with each word of the prefix it shares with ``before`` (the last
    probe's, of the same speech: its words up to there the same in canonical form) counted at
    :data:`AGREED_PROBABILITY` at least (or the higher of the two decodes' probabilities), unless
    either decode put it under :data:`NOISE_PROBABILITY`."""
    out: list[HeardWord] = []
    for index, word in enumerate(now):
        form = canonical(word.text)
        earlier = before[index] if index < len(before) else None
        if AGREED_PROBABILITY <= 0 or earlier is None or not form or canonical(earlier.text) != form:
            out.extend(now[index:])
            break
        if min(word.probability, earlier.probability) < NOISE_PROBABILITY:
            out.append(word)  # a guess at a noise, twice ("but" 0.07, 0.11 after a "Yeah"): no word
        else:
            out.append(HeardWord(word.text, max(word.probability, earlier.probability, AGREED_PROBABILITY)))
    return tuple(out)


def without_echo(
    words: Sequence[HeardWord], played: Sequence[str]
) -> tuple[tuple[HeardWord, ...], tuple[HeardWord, ...]]:
    """``words`` split into the caller's and the assistant's own echo: a word that is a word of
    ``played`` (the reply's words played while the probe's audio was picked up) in canonical form,
    or, of 4 letters or more, one edit from one or either one beginning the other (a cut-off or
    lengthened echo: "Fear", "Fearlessly" for "fearless"). On a leg without echo cancellation the
    probes hear the reply's story under the caller's voice; its words are neither a backchannel
    nor a word that asks for the turn."""
    forms = {canonical(word) for word in played} - {""}
    if not forms:
        return tuple(words), ()
    kept: list[HeardWord] = []
    echoed: list[HeardWord] = []
    for word in words:
        form = canonical(word.text)
        (echoed if form and any(_echoes(form, listed) for listed in forms) else kept).append(word)
    return tuple(kept), tuple(echoed)


def _echoes(heard: str, played: str) -> bool:
    if heard == played:
        return True
    if min(len(heard), len(played)) < 4:
        return False
    return edit_distance(heard, played) <= 1 or heard.startswith(played) or played.startswith(heard)


def _is_cue(heard: _Heard, table: Backchannels) -> bool:
    """The piece (or its stem before an apostrophe: "where's") is a cue word, or a number."""
    stem = canonical(heard.piece.split("'")[0])
    return heard.form in table.cue_forms or stem in table.cue_forms or any(ch.isdigit() for ch in heard.form)


class Verdict(enum.Enum):
    """:func:`judge`'s answer."""

    BACKCHANNEL = "backchannel"  # listening: the answer goes on
    SHAPED = "shaped"  # words off the list, of a backchannel's shape: the answer goes on once the turn ended
    TURN = "turn"  # asks for the turn: the answer stops
    UNDECIDED = "undecided"  # not yet: the caller is still speaking


def judge(
    words: Sequence[HeardWord] | str,
    language: str = "en",
    *,
    complete: bool = True,
    voiced_ms: float = 0.0,
    question: bool = False,
) -> tuple[Verdict, list[str]]:
    """Backchannel or turn, and the words that ask for the turn (lower case, in order).

    ``words`` as for :func:`interrupting_words`; ``complete`` False while the caller still speaks;
    ``voiced_ms`` the speech so far (its voiced chunks and short dips, pauses left out, ms); ``question``
    the transcript has a "?". While the caller speaks: TURN on a cue word (:data:`CUE_SURE`, or
    unsure past :data:`UNSURE_CUE_MS`; a command word from :data:`COMMAND_SURE`), or on sure words
    off the list that no backchannel has (:data:`SURE_WORDS` different ones, or any past
    :data:`SHAPE_MAX_MS`); else UNDECIDED (hear more). Once the speech is over: TURN on a cue word
    (unsure ones past :data:`UNSURE_CUE_MS`; a command word from :data:`COMMAND_SURE`), a
    question, or words off the list unlike a backchannel's shape (more different ones than
    :data:`SHAPE_MAX_WORDS` above Whisper's noise guesses, :data:`NOISE_PROBABILITY`, or past
    :data:`SHAPE_MAX_MS`), however unsure; else SHAPED (words off the list of a backchannel's
    shape) or BACKCHANNEL (none off the list). Words are counted whole ("O-I-C" is one) and a
    word repeated ("Hoyas Hoyas") once: repeating is a backchannel's shape."""
    table = _table(language)
    off = _off_list(words, table)

    def needed(heard: _Heard) -> float:
        return TRAILING_PROBABILITY if heard.last and not complete else MIN_PROBABILITY

    def counts(heard: _Heard) -> bool:
        if heard.form in table.command_forms and heard.probability >= COMMAND_SURE:
            return True
        return _is_cue(heard, table) and (
            heard.probability >= CUE_SURE
            or (voiced_ms >= UNSURE_CUE_MS and heard.probability >= NOISE_PROBABILITY and (complete or not heard.last))
        )

    cues = [h.piece for h in off if counts(h)]
    if not complete:
        sure = [h for h in off if h.probability >= needed(h) and not (h.last and h.form in table.lead_forms)]
        if cues or len({h.word for h in sure}) >= SURE_WORDS or (sure and voiced_ms > SHAPE_MAX_MS):
            return Verdict.TURN, cues or [h.piece for h in sure]
        return Verdict.UNDECIDED, []
    heard = [h for h in off if h.probability >= NOISE_PROBABILITY]
    if cues:
        return Verdict.TURN, cues
    if heard and (question or len({h.word for h in heard}) > SHAPE_MAX_WORDS or voiced_ms > SHAPE_MAX_MS):
        return Verdict.TURN, [h.piece for h in heard]
    return (Verdict.SHAPED if heard else Verdict.BACKCHANNEL), []


def _sound_at(forms: list[str], start: int, table: Backchannels) -> int:
    """2 or 3 when the words from ``start`` written together are one sound ("ye he" -> "yehe"); a
    word that is a backchannel or begins a phrase on its own is never swallowed ("okay I see")."""
    for size in (3, 2):
        rest = forms[start + 1 : start + size]
        if (
            start + size <= len(forms)
            and not any(form in table.lead_forms or _is_backchannel_word(form, table) for form in rest)
            and VOCABLES.match(canonical("".join(forms[start : start + size])))
        ):
            return size
    return 0
