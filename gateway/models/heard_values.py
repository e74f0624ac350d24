"""Whether a call's argument values were heard: their words are in the conversation.

A call "auto" made for a knowledge question near a tool's subject fills its arguments with values
nobody said: "How much does a taxi ride usually cost per mile?" -> ``order_taxi("New York")``,
"What time does the New York stock exchange open?" -> ``check_flight("N0012345")``. The model can be
sure of such a value (the token check of :func:`gateway.models.tool_decision.invented` lets both
stand), yet its words appear nowhere in what was said. :func:`unheard` names the string values of a
call whose words are not in the conversation's text, but for what a value may say differently from
the caller (derived, so heard):

- a word that differs from a heard one only by an ending ("eggs" / "egg", "classic" / "classical"),
  and words said apart written together ("BA117" for "BA 117");
- a number written in digits or words ("twenty" / "20"), a clock hour either way round ("6 pm" /
  "18:00"), minutes and seconds of zero, "am" / "pm" and the common units, and the defaults of a
  value the caller left out ("now", "today", "current location");
- a code: a value of two to five capitals ("AAPL" for Apple, "USD" for dollars) or of two or three
  small letters ("de" for German): a symbol the model derives from a name;
- a date (with or without its time) when the conversation names a time at all (a number, "today",
  "tonight", "tomorrow", a weekday...): the model knows the day from the caller's words only;
- a value of a translation tool, or of an argument that is a language (the tool's name or
  description holds "translat", the argument's name or description "translat" or "language"): the
  words of another language are not the caller's.

A value of an argument whose schema lists its values (``enum``) is the schema's, not the model's,
and is not judged. Function words ("the", "some", "my") need not be heard.

:func:`unheard` is off in the engine (``tool_decision.HEARD_CHECK``): on held-out material it lost
wanted calls whose times and days the model wrote its own way. What "auto" runs is the narrower
:func:`unheard_names` (``tool_decision.NAMES_CHECK``): only a *name* (capitalised words, no digit,
no code) of which no word was said is invented ("How many minutes are in a day?" ->
``get_time("New York")``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.models.base import ChatMessage, FunctionTool, ToolCall

_WORD = re.compile(r"[a-z0-9]+")
FUNCTION_WORDS = frozenset(
    "a an the of in on at to for from by with and or my me i you your our us we it its this that some "
    "please is are be do".split()
)
_UNITS = frozenset(
    "am pm h hr hrs min mins minute minutes hour hours s sec second seconds c f celsius fahrenheit "
    "km m mi mile miles kg g lb lbs percent".split()
)
# What a call may fill an optional value with when the caller named none: now, here.
_DEFAULTS = frozenset("now asap immediately today current here location".split())
_TIME_WORDS = frozenset(
    "now today tonight tomorrow yesterday morning afternoon evening night noon midnight week weekend "
    "monday tuesday wednesday thursday friday saturday sunday minutes hours".split()
)
_NOT_NAMES = FUNCTION_WORDS | _UNITS | _DEFAULTS | _TIME_WORDS
_DATE = re.compile(r"^\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ t]\d{1,2}(:\d{2})*)?\s*([ap]\.?m\.?)?\s*$", re.I)
_CODE = re.compile(r"^(?:[A-Z]{2,5}|[a-z]{2,3})$")
_SMALL = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}


def unheard(call: ToolCall, tool: FunctionTool, messages: list[ChatMessage]) -> list[str]:
    """The string values of ``call`` (a call of ``tool``) whose words were not heard in
    ``messages`` (every message's text: the instructions, the caller's words, earlier replies);
    empty when every value was heard or is derived (the module's docstring)."""
    values = _judged_values(call, tool)
    said, words, squeezed = _said(messages)
    numbers = _numbers(said)
    timed = bool(numbers) or bool(words & _TIME_WORDS)
    return [t for t in values if not heard(t, words, numbers, timed) and not _squeezed_in(t, squeezed)]


def unheard_names(call: ToolCall, tool: FunctionTool, messages: list[ChatMessage]) -> list[str]:
    """The names among ``call``'s string values that nobody said: a value is a name when it has no
    digit, is no code and each of its words but function words is capitalised ("New York", "The
    Golden Dragon"); it is heard when at least one of those words (or one with another ending) is in
    ``messages``' text. Free text ("water the plants"), times, amounts and codes are not judged
    (the model writes those in forms of its own); nor are the values :func:`unheard` leaves alone
    (an enum's, a translation's or a language's). "How many minutes are in a day?" with a
    ``get_time(city)`` tool -> ``get_time("New York")``: ``["New York"]``."""
    values = _judged_values(call, tool)
    _, words, squeezed = _said(messages)
    missed = []
    for text in values:
        content = _name_words(text)
        if content and not _squeezed_in(text, squeezed):
            if not any(w in words or any(_same_stem(w, h) for h in words) for w in content):
                missed.append(text)
    return missed


def _judged_values(call: ToolCall, tool: FunctionTool) -> list[str]:
    """The string values of ``call``'s arguments that are judged (:func:`_judged`); [] when its
    arguments are no JSON object."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return []
    if not isinstance(arguments, dict):
        return []
    properties = (tool.parameters or {}).get("properties", {})
    if not isinstance(properties, dict):
        properties = {}
    return [
        text
        for key, value in arguments.items()
        if _judged(key, properties.get(key, {}), tool)
        for text in _strings(value)
    ]


def _said(messages: list[ChatMessage]) -> tuple[str, set[str], str]:
    """Every message's text, lower case, in one string; its words; and those words run together
    (for :func:`_squeezed_in`)."""
    said = " ".join(m.content for m in messages if m.content).lower()
    found = _WORD.findall(said)
    return said, set(found), "".join(found)


def _name_words(value: str) -> list[str]:
    """The words of ``value`` (lower case) when it is a name (:func:`unheard_names`), else []."""
    if any(c.isdigit() for c in value) or _CODE.match(value.strip()):
        return []
    tokens = [t for t in re.findall(r"[^\W\d_][\w'’.-]*", value) if t.lower().strip("'’.-") not in _NOT_NAMES]
    if not tokens or not all(t[0].isupper() for t in tokens):
        return []
    return [w for t in tokens for w in _WORD.findall(t.lower()) if w not in _NOT_NAMES and len(w) > 1]


def heard(value: str, words: set[str], numbers: set[int], timed: bool) -> bool:
    """True when ``value``'s words are heard among ``words`` (and ``numbers``: the numbers said,
    in digits or words; ``timed``: the conversation names a time), or it is a code or a date."""
    if _CODE.match(value.strip()) or (timed and _DATE.match(value)):
        return True
    value_numbers = _numbers(value.lower())
    for word in _WORD.findall(value.lower()):
        if word in FUNCTION_WORDS or word in _UNITS or word in _DEFAULTS or word in words:
            continue
        if word.isdigit():
            n = int(word)
            if n == 0 or n in numbers or (0 < n - 12 <= 12 and n - 12 in numbers):
                continue
            return False
        if word in _SMALL or word in _TENS:  # a number in words: heard when said in digits too
            if value_numbers & numbers:
                continue
            return False
        if not any(_same_stem(word, w) for w in words):
            return False
    return True


def _judged(key: str, spec: Any, tool: FunctionTool) -> bool:
    """Whether a value of argument ``key`` (``spec``: its schema) is judged: not one of an enum's
    values, not of a translation or a language (the argument's name or description, or the
    tool's, says so)."""
    if not isinstance(spec, dict) or "enum" in spec:
        return False
    about = f"{key} {spec.get('description', '')} {tool.name} {tool.description}".lower()
    return "translat" not in about and "language" not in f"{key} {spec.get('description', '')}".lower()


def _strings(value: Any) -> list[str]:
    """The non-empty strings in ``value`` (a JSON value: lists and objects searched)."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


def _squeezed_in(value: str, squeezed: str) -> bool:
    """True when ``value``, its spaces and marks taken out, is in ``squeezed`` (the conversation so
    written): "BA117" for "BA 117", "5th" for "5 th" (4 characters at least)."""
    letters = "".join(_WORD.findall(value.lower()))
    return len(letters) >= 4 and letters in squeezed


def _same_stem(a: str, b: str) -> bool:
    """True when one word is the other with an ending of at most three letters (both of 3+)."""
    short, long = sorted((a, b), key=len)
    return len(short) >= 3 and long.startswith(short) and len(long) - len(short) <= 3


def _numbers(text: str) -> set[int]:
    """The numbers in ``text``: in digits, and in English words up to ninety-nine ("twenty five")."""
    found = {int(w) for w in _WORD.findall(text) if w.isdigit() and len(w) <= 9}
    tokens = _WORD.findall(text.replace("-", " "))
    for i, word in enumerate(tokens):
        if word in _SMALL:
            found.add(_SMALL[word])
        elif word in _TENS:
            following = tokens[i + 1] if i + 1 < len(tokens) else ""
            found.add(_TENS[word] + (_SMALL[following] if following in _SMALL and _SMALL[following] < 10 else 0))
    return found
