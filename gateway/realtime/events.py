"""OpenAI Realtime event shapes: ids, server event envelopes, GA/beta names.

Reference: the OpenAI Realtime API event reference (GA, 2025-08) and its beta predecessor. The GA
names are primary; a session that speaks beta (flat ``session.update``) gets the beta names.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

# GA server event name -> beta name, for sessions that speak the beta protocol.
GA_TO_BETA = {
    "conversation.item.added": "conversation.item.created",
    "response.output_text.delta": "response.text.delta",
    "response.output_text.done": "response.text.done",
    "response.output_audio.delta": "response.audio.delta",
    "response.output_audio.done": "response.audio.done",
    "response.output_audio_transcript.delta": "response.audio_transcript.delta",
    "response.output_audio_transcript.done": "response.audio_transcript.done",
}
# GA events with no beta counterpart (not sent to beta sessions).
GA_ONLY = {"conversation.item.done"}

# Client event aliases (beta name -> GA name).
CLIENT_ALIASES: dict[str, str] = {}

CLIENT_EVENTS = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "output_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.retrieve",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
)


def new_id(prefix: str) -> str:
    """An id shaped like OpenAI's: ``prefix`` + ``_`` + 21 url-safe characters (e.g. ``item_...``)."""
    return f"{prefix}_{secrets.token_urlsafe(16)[:21]}"


def server_event(event_type: str, **fields: Any) -> dict:
    """A server event with a fresh ``event_id``."""
    return {"type": event_type, "event_id": new_id("event"), **fields}


def error_event(message: str, code: str | None = None, param: str | None = None,
                event_id: str | None = None, error_type: str = "invalid_request_error") -> dict:
    """The ``error`` server event; ``event_id`` is the client event that caused it, if any."""
    return server_event(
        "error",
        error={"type": error_type, "code": code, "message": message, "param": param, "event_id": event_id},
    )


def message_item(role: str, content: list[dict], item_id: str | None = None, status: str = "completed") -> dict:
    """A conversation item of type ``message`` (``realtime.item``)."""
    return {
        "id": item_id or new_id("item"),
        "object": "realtime.item",
        "type": "message",
        "status": status,
        "role": role,
        "content": content,
    }


def response_object(response_id: str, status: str = "in_progress", output: list | None = None,
                    modalities: list[str] | None = None, status_details: dict | None = None,
                    usage: dict | None = None) -> dict:
    return {
        "id": response_id,
        "object": "realtime.response",
        "status": status,
        "status_details": status_details,
        "output": output or [],
        "output_modalities": modalities or ["audio"],
        "usage": usage,
        "created_at": int(time.time()),
    }
