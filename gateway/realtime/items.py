"""Conversation items as clients send them: validation, and the text the LLM gets from them."""

from __future__ import annotations

import re
from typing import Any, Optional

from gateway.realtime.events import new_id

_WORD = re.compile(r"\w")


class ClientError(Exception):
    """A client event that cannot be honoured; the session turns it into an ``error`` event that
    echoes the event's ``event_id``. ``param`` is the offending field, ``code`` OpenAI's error code;
    ``event_id`` the client's, when the error is raised before the session knows the event (the
    door's checks of a message, ``gateway.realtime.client_messages``)."""

    def __init__(self, message: str, code: Optional[str], param: Optional[str], event_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param
        self.event_id = event_id


def is_int(value: Any) -> bool:
    """An int that is not a bool (JSON true/false must not pass as 1/0)."""
    return isinstance(value, int) and not isinstance(value, bool)


def has_words(transcript: str) -> bool:
    """True when a transcript holds a word (a letter or digit of any script). Speech-to-text writes
    a breath or a click as punctuation alone (Whisper: ".", "...", "?"; music as "♪"): no words."""
    return _WORD.search(transcript) is not None


def item_text(item: dict) -> str:
    """The words of a message item (text and transcripts of its parts), for the LLM prompt. A
    transcript with no words (:func:`has_words`) is left out; a text is kept as it was written."""
    pieces = []
    for part in item.get("content", []):
        text = part.get("text") if part.get("text") is not None else part.get("transcript")
        spoken = part.get("text") is None
        if isinstance(text, str) and text.strip() and (has_words(text) or not spoken):
            pieces.append(text.strip())
    return " ".join(pieces)


_CONTENT_TYPES = {
    "user": {"input_text", "input_audio"},
    "system": {"input_text"},
    "assistant": {"output_text", "output_audio", "text", "audio"},
}


def validate_item(item: dict, param: str = "item") -> dict:
    """Check a client-supplied conversation item; fill in id/object/status. ``param`` names it in errors."""
    kind = item.get("type")
    if kind not in ("message", "function_call", "function_call_output"):
        raise ClientError(
            f"'{param}.type' must be 'message', 'function_call' or 'function_call_output'.",
            "invalid_value",
            f"{param}.type",
        )
    if "id" in item and not isinstance(item["id"], str):
        raise ClientError(f"'{param}.id' must be a string.", "invalid_type", f"{param}.id")
    item = dict(item)
    if item.get("id") is None:
        item["id"] = new_id("item")
    item["object"] = "realtime.item"
    item["status"] = "completed"
    if kind != "message":
        return _validate_function_item(item, param)
    role = item.get("role")
    if role not in _CONTENT_TYPES:
        raise ClientError(f"'{param}.role' must be 'user', 'assistant' or 'system'.", "invalid_value", f"{param}.role")
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise ClientError(f"'{param}.content' must be a non-empty array.", "invalid_value", f"{param}.content")
    item["content"] = [validate_part(part, role, f"{param}.content[{index}]") for index, part in enumerate(content)]
    return item


def validate_part(part: Any, role: str, param: str) -> dict:
    """Check one content part of a ``role`` message; assistant parts are stored under GA names."""
    if not isinstance(part, dict) or part.get("type") not in _CONTENT_TYPES[role]:
        allowed = ", ".join(sorted(_CONTENT_TYPES[role]))
        raise ClientError(f"'{param}.type' must be one of: {allowed}.", "invalid_value", f"{param}.type")
    if part["type"] in ("input_text", "output_text", "text") and not isinstance(part.get("text"), str):
        raise ClientError(f"'{param}.text' must be a string.", "invalid_type", f"{param}.text")
    if part["type"] in ("audio", "output_audio"):
        # Assistant audio is stored under the GA name; a beta session sees "audio" again.
        part = dict(part, type="output_audio")
    elif part["type"] == "text":
        part = dict(part, type="output_text")
    return dict(part)


def _validate_function_item(item: dict, param: str) -> dict:
    """A client's ``function_call`` (``name``, ``arguments``; a ``call_id`` is made if absent) or
    ``function_call_output`` (``call_id``, ``output``) item, checked; ``content`` is not kept."""
    item.pop("content", None)
    if item["type"] == "function_call":
        if item.get("call_id") is None:
            item["call_id"] = new_id("call")
        _require_string(item, "name", param)
        _require_string(item, "arguments", param)
    else:
        _require_string(item, "output", param)
    _require_string(item, "call_id", param)
    return item


def _require_string(item: dict, key: str, param: str) -> None:
    if key not in item:
        raise ClientError(
            f"Missing required parameter: '{param}.{key}'.", "missing_required_parameter", f"{param}.{key}"
        )
    if not isinstance(item[key], str):
        raise ClientError(f"Invalid type for '{param}.{key}': expected a string.", "invalid_type", f"{param}.{key}")
