"""Logging of one gateway process: text or JSON lines, the call id on every line of a call, and no
secret or full call id in any line.

A call's code runs in tasks (event loop) and in stage threads; both mark the call they work for
with :func:`bind_call` (a ``contextvars.ContextVar``: asyncio tasks inherit it from the code that
created them, each stage thread sets it per message). Every record then carries ``call``: the
call id shortened as ``GET /v1/pool`` shows it (:func:`redact_call_id`), ``-`` outside a call.

A full call id is a hang-up capability (``DELETE /v1/realtime/calls/{id}`` needs no key), so
:class:`RedactingFilter` shortens any call id in a message (access-log paths included) and drops
``ek_`` keys, bearer tokens and the configured secrets. Standard library only (and
``gateway.call_ids``), so any layer may import it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
import time
from collections.abc import Iterable
from typing import Any, Optional

from gateway.call_ids import INSTANCE_PATTERN, PREFIX_PATTERN

CALL_ID: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("vg_call_id", default=None)

# <rtc|ws|sip>_<instance>_<32 hex> (this gateway's call ids, gateway.call_ids) and the older
# <prefix>_<32 hex>: the first 8 hex digits kept.
_CALL_ID_RE = re.compile(rf"\b({PREFIX_PATTERN}_(?:{INSTANCE_PATTERN}_)?[0-9a-f]{{8}})[0-9a-f]{{24}}\b")
_EPHEMERAL_KEY_RE = re.compile(r"\bek_[A-Za-z0-9_-]{8,}")
_BEARER_RE = re.compile(r"(?i)\b(bearer\s+)[^\s\"',]+")
_REDACTED = "[redacted]"


def redact_call_id(call_id: Optional[str]) -> str:
    """``rtc_<instance>_0123abcd...`` (``ws_``, ``sip_`` alike): the instance and the first 8 hex
    digits, enough to match a log line to ``/v1/pool``, useless to hang the call up with; ``-``
    for None."""
    if not call_id:
        return "-"
    shortened = _CALL_ID_RE.sub(r"\1...", call_id)
    return shortened if shortened != call_id else call_id[:12] + "..."


def bind_call(call_id: Optional[str]) -> contextvars.Token[Optional[str]]:
    """Mark the current task or thread as working for ``call_id`` (None: for no call); returns the
    token for ``CALL_ID.reset``. Tasks created afterwards inherit it."""
    return CALL_ID.set(call_id)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with call ids shortened, ``ek_`` keys, bearer tokens and each of ``secrets``
    (non-empty strings of 4+ characters) replaced by ``[redacted]``."""
    text = _CALL_ID_RE.sub(r"\1...", text)
    text = _EPHEMERAL_KEY_RE.sub("ek_" + _REDACTED, text)
    text = _BEARER_RE.sub(r"\1" + _REDACTED, text)
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, _REDACTED)
    return text


class RedactingFilter(logging.Filter):
    """Adds ``call`` (the redacted call id of the current call, ``-`` if none) and ``instance`` to
    each record, and redacts its message (see :func:`redact_text`); formats the message once, so
    ``record.args`` is emptied. Put on handlers, so records of every logger pass it."""

    def __init__(self, instance: str = "", secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.instance = instance
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "call"):
            record.call = redact_call_id(CALL_ID.get())
        record.instance = self.instance
        message = record.getMessage()
        redacted = redact_text(message, self.secrets)
        if record.args or redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info), self.secrets)
        return True


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(call)s]: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts`` (ISO 8601 UTC, ms), ``level``, ``logger``, ``message``,
    ``call`` (redacted call id or ``-``), ``instance``, ``thread`` and, with an exception, ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry: dict[str, Any] = {
            "ts": f"{moment}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "call": getattr(record, "call", "-"),
            "instance": getattr(record, "instance", ""),
            "thread": record.threadName,
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(
    level: str = "INFO", log_format: str = "text", instance: str = "", secrets: Iterable[str] = (), stream: Any = None
) -> logging.Handler:
    """Replace the root logger's handlers with one on ``stream`` (default stderr): ``text``
    (:data:`TEXT_FORMAT`) or ``json`` (:class:`JsonFormatter`), through a :class:`RedactingFilter`
    with ``instance`` and ``secrets``. Returns the handler. Raises ValueError for another format."""
    if log_format not in ("text", "json"):
        raise ValueError(f"log_format {log_format!r}: use 'text' or 'json'")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(RedactingFilter(instance, secrets))
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
