"""Make LLM text fit to be read aloud: no markdown, list markers, emoji or symbols TTS reads badly.

Two steps, because markdown has line structure and TTS takes sentences:

- :class:`SpokenTextStream` sits before the sentence chunker and sees the raw stream piece by piece.
  It drops what opens a line (``- ``, ``* ``, ``1. ``, ``# ``, ``> ``), code fences and table rules,
  and turns a line break into a sentence end, so a list is spoken as one short sentence per item.
- :func:`spoken` cleans one finished sentence: emphasis and code marks, links (their text stays),
  emoji, and symbols said as words the way a listener expects them ("20 °C" -> "20 degrees
  Celsius", "5%" -> "5 percent", "$3" -> "3 dollars", "3-5" -> "3 to 5").
"""

from __future__ import annotations

import re

# What may open a markdown line: bullets, numbered items, headings, quotes.
_LINE_MARKER = re.compile(r"^[ \t]*(?:[-*+•‣▪●]|\d{1,3}[.)]|#{1,6}|>+)[ \t]+")
_MAYBE_MARKER = re.compile(r"^[ \t]*(?:[-*+•‣▪●]|\d{1,3}[.)]?|#{1,6}|>+)?$")  # a line start still undecided
_MAYBE_RULE = re.compile(r"^[ \t]*[`\-=*_|:]*$")
_RULE = re.compile(r"^[ \t]*(?:```.*|[-=*_|: ]{3,})$")  # code fences, horizontal rules, table rules
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~|`+)")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff\U00002b00-\U00002bff\ufe0f\u200d\u20e3]"
)
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_SYMBOLS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\s*°\s*C\b"), " degrees Celsius"),
    (re.compile(r"\s*°\s*F\b"), " degrees Fahrenheit"),
    (re.compile(r"\s*°"), " degrees"),
    (re.compile(rf"\$\s?({_NUMBER})(\s?(?:million|billion|trillion|thousand))?"), r"\1\2 dollars"),
    (re.compile(rf"€\s?({_NUMBER})(\s?(?:million|billion|trillion|thousand))?"), r"\1\2 euros"),
    (re.compile(rf"£\s?({_NUMBER})(\s?(?:million|billion|trillion|thousand))?"), r"\1\2 pounds"),
    (re.compile(rf"({_NUMBER})\s?%"), r"\1 percent"),
    (re.compile(rf"({_NUMBER})\s?[-–—]\s?({_NUMBER})"), r"\1 to \2"),
    (re.compile(rf"~\s?({_NUMBER})"), r"about \1"),
    (re.compile(r"\s&\s"), " and "),
    (re.compile(r"\s=\s"), " equals "),
]
_SPACES = re.compile(r"[ \t]+")


def spoken(sentence: str) -> str:
    """``sentence`` as it should be read aloud (see the module docstring); "" if nothing is left."""
    text = _LINK.sub(r"\1", sentence)
    text = _URL.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = _EMOJI.sub("", text)
    text = re.sub(r"(?<!\w)_(\S[^_]*)_(?!\w)", r"\1", text)  # _emphasis_, not snake_case
    for pattern, words in _SYMBOLS:
        text = pattern.sub(words, text)
    text = re.sub(r"\s*\|\s*", ", ", text).replace("#", "")
    text = re.sub(r"(?:,\s*)+([.!?])", r"\1", text)
    text = re.sub(r"(?:,\s*){2,}", ", ", text)
    text = re.sub(r"\s+([.,!?;:])", r"\1", _SPACES.sub(" ", text))
    return text.strip(" ,")


class SpokenTextStream:
    """Line-aware filter for streamed LLM text: :meth:`push` each piece, :meth:`flush` at the end.

    Returns text with markdown line openers removed and line breaks turned into sentence ends. Only
    the first few characters of a line are held back, until it is clear whether they open a list
    (a rule or code fence line is held to its end and dropped).
    """

    def __init__(self) -> None:
        self._line = ""  # the start of the current line, while it may still be a marker or a rule
        self._line_open = True  # True until the current line's start has been decided
        self._last = ""  # last non-blank character passed on in the current line

    def push(self, piece: str) -> str:
        """Filtered text now ready for the chunker."""
        out: list[str] = []
        for char in piece:
            if char == "\n":
                out.append(self._end_line())
            elif not self._line_open:
                out.append(char)
                self._last = char if not char.isspace() else self._last
            else:
                self._line += char
                if not _undecided(self._line):
                    opened = _LINE_MARKER.sub("", self._line)
                    out.append(opened)
                    self._last = opened.rstrip()[-1:] or self._last
                    self._line, self._line_open = "", False
        return "".join(out)

    def flush(self) -> str:
        """What is still held at the end of the reply."""
        return self._end_line(final=True).strip()

    def _end_line(self, final: bool = False) -> str:
        held = self._line
        if held.strip().isdigit():
            pass  # a number alone on its line is said
        elif _undecided(held):
            held = ""
        else:
            held = _LINE_MARKER.sub("", held)
        if held.strip():
            self._last = held.rstrip()[-1]
        had_text = not self._line_open or bool(held.strip())
        last, self._last = self._last, ""
        self._line, self._line_open = "", True
        if not had_text:
            return " "
        return held + (" " if final or last in ".!?:;," else ". ")


def _undecided(line: str) -> bool:
    """True while ``line`` (the start of a line) may still be a list marker, heading, rule or fence."""
    return bool(_MAYBE_MARKER.match(line) or _MAYBE_RULE.match(line) or _RULE.match(line))
