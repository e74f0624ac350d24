"""Cut streaming LLM text into pieces TTS can speak while the LLM goes on."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (or … ) followed by whitespace; a clause at , ; : followed by whitespace.
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*\s")
_CLAUSE_END = re.compile(r"[,;:]\s")
_WORD_END = re.compile(r"\S\s")
_ABBREVIATIONS = {"mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "e.g.", "i.e.", "etc.", "no.", "jr.", "sr."}
# The first piece may end at its mark itself (. ! ? , ;), before the whitespace after it: an LLM's
# tokens carry that space at the start of the next word, so waiting for it cost one more decode step
# (~45-60 ms on 2 cores) before the caller heard anything ("Ten clubs." waited for the end of the
# reply, "One." for " Two"; docs/BENCHMARKS.md, stop 51). Only a mark right after a word of two or
# more letters (' or - inside: "don't") that is no abbreviation: "3." (3.50), "U.S.", "J." and "Mr."
# wait for what follows.
# The price: a "." with no space after it in a first piece ("example.com", "john.smith@...", a file
# name) is cut there when the LLM writes it as a token of its own. False: always wait.
EARLY_FIRST_CUT = True
_EARLY_END = re.compile(r"(?:^|\s)([^\W\d_]+(?:['’-][^\W\d_]+)*)([.!?,;])\Z")
_LEFTOVER = re.compile(r"[.!?…\"'”’»)\]]+")  # what goes on from a mark already spoken: "!" of "?!", a closing quote


class SentenceChunker:
    """Accumulate text pieces; hand back a short first clause, then whole sentences.

    The first piece of a reply is what the caller waits for, so it is cut early: at the end of the
    first sentence, at a clause mark (, ; :) once it has ``first_min_words`` words, or after
    ``first_max_words`` words when no mark comes (TTS then speaks it while the LLM writes the rest);
    a sentence or clause mark ends it as it comes, not with the next token's space
    (:data:`EARLY_FIRST_CUT`).
    Later pieces are whole sentences, or clauses once at least ``clause_min_chars`` long.
    ``max_chars``: a piece with no punctuation is cut at a space.
    """

    def __init__(
        self,
        first_min_words: int = 3,
        first_max_words: int = 6,
        clause_min_chars: int = 60,
        max_chars: int = 200,
    ) -> None:
        self._buffer = ""
        self._first = True
        self._early = False  # the last piece ended at a mark before its whitespace came
        self._first_min_words = first_min_words
        self._first_max_words = first_max_words
        self._clause_min = clause_min_chars
        self._max = max_chars

    def push(self, text: str) -> list[str]:
        """Add ``text``; return the pieces now complete (stripped, non-empty). Punctuation that
        continues a first piece cut at its mark ("!" after "Really?", a closing quote) is dropped:
        that piece is already spoken."""
        if self._early and not self._buffer:
            leftover = _LEFTOVER.match(text)
            text = text[leftover.end() :] if leftover else text
            self._early = not text
        self._buffer += text
        pieces: list[str] = []
        while True:
            cut = self._find_cut()
            if cut is None:
                break
            piece, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:]
            if piece:
                pieces.append(piece)
                self._first = False
        return pieces

    def flush(self) -> list[str]:
        """The rest of the text at the end of the reply."""
        piece, self._buffer = self._buffer.strip(), ""
        return [piece] if piece else []

    def _find_cut(self) -> int | None:
        for match in _SENTENCE_END.finditer(self._buffer):
            word = self._buffer[: match.start() + 1].rsplit(None, 1)[-1].lower()
            if word in _ABBREVIATIONS:
                continue
            return match.end()
        if self._first:
            return self._first_clause_cut()
        for match in _CLAUSE_END.finditer(self._buffer):
            if match.end() >= self._clause_min:
                return match.end()
        if len(self._buffer) > self._max:
            space = self._buffer.rfind(" ", 0, self._max)
            return space + 1 if space > 0 else self._max
        return None

    def _first_clause_cut(self) -> int | None:
        """Where the first piece ends, if it can end yet (no sentence end in the buffer)."""
        for match in _CLAUSE_END.finditer(self._buffer):
            if len(self._buffer[: match.start() + 1].split()) >= self._first_min_words:
                return match.end()
        if self._ends_at_its_mark():
            self._early = True
            return len(self._buffer)
        # After first_max_words complete words (a word is complete once whitespace follows it).
        ends = [m.end() for m in _WORD_END.finditer(self._buffer)]
        if len(ends) >= self._first_max_words:
            return ends[self._first_max_words - 1]
        if len(self._buffer) > self._max:
            space = self._buffer.rfind(" ", 0, self._max)
            return space + 1 if space > 0 else self._max
        return None

    def _ends_at_its_mark(self) -> bool:
        """The buffer ends with a mark the first piece may end at before its whitespace comes
        (:data:`EARLY_FIRST_CUT`): . ! ? after a word of 2+ letters that is no abbreviation, or , ;
        once the piece has ``first_min_words`` words."""
        early = _EARLY_END.search(self._buffer) if EARLY_FIRST_CUT else None
        if early is None or len(early.group(1)) < 2:
            return False
        word, mark = early.group(1), early.group(2)
        if mark in ".!?":
            return mark != "." or f"{word.lower()}." not in _ABBREVIATIONS
        return len(self._buffer.split()) >= self._first_min_words
