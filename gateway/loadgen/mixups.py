"""Did a turn hear and answer its own caller's question? The load generator's check that nothing of
one caller reached another (design: a call's transcripts, prompts, KV cells and held replies are
its own).

Each recording of a run has a known transcript (``transcripts.tsv``). A turn is **mixed up** when

- what the gateway *heard* (the turn's input transcripts) matches a recording this caller never
  played better than the one it played (``heard <file>``), or
- what it *said* (the reply's transcript) matches a recording this caller never asked, and not the
  questions it did (``said <file>``: another caller's words; the default small model often echoes
  or paraphrases what it is told, so an answer shares words with its question).

A reply that matches one of the caller's *earlier* questions and not the current one is reported
as ``stale <file>`` (its own history repeated: the model's, or an old reply played again), a
warning rather than a leak. Words are compared as content words (``gateway.loadgen.words``: lower
case, Whisper's spelling variants made one, function words left out); a recording "matches" when
at least :data:`MATCH` of its content words are in the text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.loadgen.words import STOP_WORDS, content_words

MATCH = 0.5  # share of a recording's content words a text must have to match it
# Negations count as function words here (a recording matches by its topic words), not in ``says``.
_FUNCTION_WORDS = STOP_WORDS | {"no", "not"}


def share(text: str, reference: str) -> float:
    """The share of ``reference``'s content words that ``text`` has (0 when it has none)."""
    wanted = set(content_words(reference, _FUNCTION_WORDS))
    return len(wanted & set(content_words(text, _FUNCTION_WORDS))) / len(wanted) if wanted else 0.0


def _best(text: str, texts: Mapping[str, str], among: Sequence[str]) -> tuple[str, float]:
    scored = [(share(text, texts[name]), name) for name in among if name in texts]
    if not scored:
        return "", 0.0
    value, name = max(scored)
    return name, value


def mixup(heard: str, said: str, asked: Sequence[str], texts: Mapping[str, str]) -> str:
    """What is wrong with one turn ("" when nothing is): ``heard`` and ``said`` are the turn's input
    and reply transcripts, ``asked`` the recordings this caller played so far (file names, the
    current one last), ``texts`` every recording's transcript by file name (the run's)."""
    current = asked[-1] if asked else ""
    if current not in texts:
        return ""  # a recording without a transcript: nothing to check against
    others = [name for name in texts if name not in asked]
    problems = []
    if heard:
        own = share(heard, texts[current])
        name, value = _best(heard, texts, others)  # (a late transcript of its own earlier question is not a leak)
        if value >= MATCH and value > own:
            problems.append(f"heard {name}")
    if said:
        own_name, own = _best(said, texts, asked)
        name, value = _best(said, texts, others)
        if value >= MATCH and value > own:
            problems.append(f"said {name}")
        elif own >= MATCH and own_name != current and share(said, texts[current]) < MATCH:
            problems.append(f"stale {own_name}")
    return ", ".join(problems)
