"""Client messages off the ``oai-events`` data channel: size, UTF-8 JSON object, event type, text
that is valid Unicode, and how many a second a client may send.

Every problem raises :class:`ClientError` with the code the session's ``error`` event carries
(``message_too_large``, ``invalid_json``, ``invalid_event``, ``missing_required_parameter``,
``invalid_value``); the call goes on. A number that is not finite (``NaN``, ``Infinity``, ``1e999``)
anywhere in an event is ``invalid_value`` with ``param`` its path, as the session config's
validation says it ("Input should be a finite number"): nothing else of the event is read, and
nothing can echo it back as the ``NaN`` that JSON has not (``JSON.parse`` fails on it). A flood
is cut to a rate by :class:`ClientEventRate`, with one ``rate_limit_exceeded`` error.

Unicode: JSON (RFC 8259 8.2) can spell a lone UTF-16 surrogate (``"\\ud800"``), which Python
reads into a ``str`` that no UTF-8 encoder takes: one such item made every later response of the
session fail (``llm_failed``). :func:`decode_client_message` repairs every string of the event at
the door: each lone surrogate becomes U+FFFD (the Unicode replacement character); a correct
surrogate pair is one character already.
"""

from __future__ import annotations

import enum
import json
import math
import re
import time
from collections.abc import Callable
from typing import Any, Optional

from gateway.realtime.events import CLIENT_ALIASES, CLIENT_EVENTS
from gateway.realtime.items import ClientError
from gateway.realtime.wire import LONE_SURROGATE, replace_lone_surrogates, utf8_size

# Larger messages get an error. Below the 256 KiB SCTP message size aiortc and browsers advertise,
# so that a too-large message reaches us (and is refused with a reason) instead of failing in the
# sender's transport; far above any legitimate event, since audio never travels on the channel.
MAX_CLIENT_MESSAGE_BYTES = 128 * 1024
# Arrays and objects nested deeper than this are refused (``invalid_json``): far beyond any event or
# tool schema, and well inside the recursion limit of what walks an event later (the Unicode repair,
# the session's validation, ``json.dumps``), which a deeper event made fail.
MAX_NESTING = 64


def decode_client_message(raw: str | bytes, max_bytes: int = MAX_CLIENT_MESSAGE_BYTES) -> dict:
    """One data-channel message (text, or bytes of UTF-8 text) as a JSON object; ``max_bytes``:
    the largest message accepted (a WebSocket session, which carries audio, allows more)."""
    size = utf8_size(raw)
    if size > max_bytes:
        raise ClientError(f"Message too large: {size} bytes (limit {max_bytes}).", "message_too_large", None)
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ClientError("Messages must be UTF-8 JSON text.", "invalid_json", None) from None
    numbers = _Numbers()
    try:
        event = json.loads(raw, parse_float=numbers.parse_float, parse_constant=numbers.parse_constant)
    except json.JSONDecodeError as exc:
        raise ClientError(f"Invalid JSON: {exc.msg} at position {exc.pos}.", "invalid_json", None) from None
    except RecursionError:  # arrays/objects nested deeper than the parser's recursion limit
        raise ClientError("Invalid JSON: nested too deeply.", "invalid_json", None) from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.int_info)
        raise ClientError(f"Invalid JSON: {exc}"[:200], "invalid_json", None) from None
    if not isinstance(event, dict):
        raise ClientError("A client event must be a JSON object.", "invalid_event", None)
    if nesting(event) > MAX_NESTING:
        raise ClientError(
            f"Invalid JSON: arrays and objects nested more than {MAX_NESTING} deep.", "invalid_json", None
        )
    if numbers.not_finite:
        param = not_finite_path(event)
        raise ClientError(
            f"Invalid value for '{param}': Input should be a finite number",
            "invalid_value",
            param,
            event_id=client_event_id(event),
        )
    repaired = repair_decoded(event, raw)
    assert isinstance(repaired, dict)
    return repaired


class _Numbers:
    """``json.loads`` hooks that note a number that is not finite (``not_finite``): the literals
    ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, RFC 8259 6, but Python's parser reads them)
    and a number too large for a double (``1e999``, read as infinity)."""

    def __init__(self) -> None:
        self.not_finite = False

    def parse_constant(self, name: str) -> float:
        self.not_finite = True
        return float(name)

    def parse_float(self, text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            self.not_finite = True
        return value


def not_finite_path(event: dict) -> str:
    """The dotted path (``response.temperature``, ``session.tools[0].parameters.maximum``) of the
    first number in ``event`` (decoded JSON, nested at most :data:`MAX_NESTING` deep) that is not
    finite, as ``param`` names a field; ``""`` when there is none."""
    stack: list[tuple[str, Any]] = [(str(key), value) for key, value in reversed(event.items())]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path
        if isinstance(node, dict):
            stack.extend((f"{path}.{key}", value) for key, value in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((f"{path}[{index}]", value) for index, value in reversed(list(enumerate(node))))
    return ""


def nesting(value: Any) -> int:
    """How deep arrays and objects nest in ``value`` (decoded JSON; a scalar: 0), found without
    recursion, stopping one level past :data:`MAX_NESTING`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        elif not isinstance(node, list):
            continue
        depth += 1
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        stack.extend((child, depth) for child in node if isinstance(child, (dict, list)))
    return deepest


# A UTF-16 surrogate spelled as a JSON escape (in text that did not come from UTF-8, it may also be
# there as itself: ``wire.LONE_SURROGATE``).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def repair_decoded(value: Any, raw: str) -> Any:
    """``value``, decoded from the JSON text ``raw``, with every lone surrogate in its strings
    replaced by U+FFFD (:func:`repair_unicode`); ``value`` itself, unwalked, when ``raw`` can hold
    none (no surrogate escape in it, nor a surrogate itself)."""
    if ("\\u" in raw and _SURROGATE_ESCAPE.search(raw)) or (not raw.isascii() and LONE_SURROGATE.search(raw)):
        return repair_unicode(value)
    return value


def repair_unicode(value: Any) -> Any:
    """``value`` (decoded JSON) with every lone surrogate in its strings, keys included, replaced
    by U+FFFD, so that all of it encodes as UTF-8."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, list):
        return [repair_unicode(item) for item in value]
    if isinstance(value, dict):
        return {repair_unicode(key): repair_unicode(item) for key, item in value.items()}
    return value


def client_event_id(event: dict) -> Optional[str]:
    """The client's ``event_id`` (echoed by an ``error`` it causes), None unless a string."""
    event_id = event.get("event_id")
    return event_id if isinstance(event_id, str) else None


def client_event_type(event: dict) -> str:
    """The GA name of the event's ``type``, one of ``CLIENT_EVENTS`` (beta aliases renamed)."""
    event_type = event.get("type")
    if not isinstance(event_type, str):
        raise ClientError("The 'type' field is missing or not a string.", "missing_required_parameter", "type")
    event_type = CLIENT_ALIASES.get(event_type, event_type)
    if event_type not in CLIENT_EVENTS:
        supported = ", ".join(f"'{name}'" for name in CLIENT_EVENTS)
        raise ClientError(
            f"Invalid value: '{event_type[:100]}'. Supported values are: {supported}.", "invalid_value", "type"
        )
    return event_type


class RateVerdict(enum.Enum):
    """What :meth:`ClientEventRate.admit` decided for one message."""

    ACCEPT = "accept"
    REFUSE_AND_TELL = "refuse_and_tell"  # refused, and the client is told (one error per flood)
    REFUSE = "refuse"  # refused without a word (the error was sent moments ago)


# The error sent once per flood (OpenAI's code and type for a rate limit).
RATE_LIMIT_CODE = "rate_limit_exceeded"
RATE_LIMIT_TYPE = "rate_limit_error"


class ClientEventRate:
    """A token bucket over one session's client messages: ``burst`` at once, ``per_second`` after.

    A legitimate client sends a few events a second; a flood (thousands a second) would make as
    many server events (errors, ``session.updated``...) pile up in the transport's send buffer.
    Beyond the rate, messages are dropped before they are parsed. The client is told with one
    ``rate_limit_exceeded`` error (:attr:`RateVerdict.REFUSE_AND_TELL`), at most once every
    ``tell_every_s`` seconds, so a flood gets one error, not one per dropped message. ``clock`` is
    monotonic seconds (tests pass a fake). ``refused`` counts dropped messages.

    The tokens may count something else than messages (``cost`` of :meth:`admit`): the audio
    budget of a session that carries audio in its events counts seconds of audio
    (``gateway.realtime.audio_intake.AudioBudget``).
    """

    def __init__(
        self,
        per_second: float = 100.0,
        burst: float = 200,
        tell_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self.tell_every_s = tell_every_s
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()
        self._told_at: Optional[float] = None
        self.refused = 0

    def available(self) -> float:
        """The tokens there are now (refilled since the last look)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.per_second)
        self._at = now
        return self._tokens

    def admit(self, cost: float = 1.0) -> RateVerdict:
        """The verdict for one message arriving now that costs ``cost`` tokens (taken if accepted)."""
        if self.available() >= cost:
            self._tokens -= cost
            return RateVerdict.ACCEPT
        return self.refuse()

    def refuse(self) -> RateVerdict:
        """Count one refused message: :attr:`RateVerdict.REFUSE_AND_TELL` for the first of a flood
        (none told in the last ``tell_every_s``), else :attr:`RateVerdict.REFUSE`."""
        now = self._clock()
        self.refused += 1
        if self._told_at is not None and now - self._told_at < self.tell_every_s:
            return RateVerdict.REFUSE
        self._told_at = now
        return RateVerdict.REFUSE_AND_TELL

    def message(self) -> str:
        """The text of the flood's error."""
        return (
            f"Too many client events: at most {self.per_second:g} a second (bursts of {self.burst}); "
            "the events beyond that are dropped."
        )
