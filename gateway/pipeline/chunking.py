"""Cut streaming LLM text into pieces TTS can speak while the LLM goes on."""

from __future__ import annotations

import re

# A sentence ends at . ! ? (or … ) followed by whitespace; a clause at , ; : followed by whitespace.
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*\s")
_CLAUSE_END = re.compile(r"[,;:]\s")
_ABBREVIATIONS = {"mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "e.g.", "i.e.", "etc.", "no.", "jr.", "sr."}


class SentenceChunker:
    """Accumulate text pieces; hand back whole sentences, or clauses once a piece is long enough.

    ``first_min_chars``: the first piece of a reply may be cut at a clause this early, so that the
    first audio does not wait for a long first sentence. ``clause_min_chars``: later clauses are cut
    only when at least this long. ``max_chars``: a piece with no punctuation is cut at a space.
    """

    def __init__(self, first_min_chars: int = 24, clause_min_chars: int = 60, max_chars: int = 200) -> None:
        self._buffer = ""
        self._first = True
        self._first_min = first_min_chars
        self._clause_min = clause_min_chars
        self._max = max_chars

    def push(self, text: str) -> list[str]:
        """Add ``text``; return the pieces now complete (stripped, non-empty)."""
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
        minimum = self._first_min if self._first else self._clause_min
        for match in _CLAUSE_END.finditer(self._buffer):
            if match.end() >= minimum:
                return match.end()
        if len(self._buffer) > self._max:
            space = self._buffer.rfind(" ", 0, self._max)
            return space + 1 if space > 0 else self._max
        return None
