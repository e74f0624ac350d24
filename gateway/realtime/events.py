"""OpenAI Realtime event shapes: ids, server event envelopes, GA/beta names.

Reference: the OpenAI Realtime API event reference (GA, 2025-08) and its beta predecessor. The GA
names are primary; a session that speaks beta (flat ``session.update``) gets the beta names.
"""

from __future__ import annotations

import secrets
import string
from typing import Any, Optional

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
# The gateway's own server events (no OpenAI event): sent only to a client that names them, with
# ``gateway_events=gateway.latency`` in the query of its offer or WebSocket URL. ``gateway.latency``:
# per-turn latency by stage (ms), for the demo page and the benchmarks; ``gateway.barge_in``: how
# caller speech under the reply's audio was judged (``gateway.pipeline.bargein``).
GATEWAY_EVENTS = frozenset({"gateway.latency", "gateway.barge_in"})

# Content part types of assistant items: GA name -> beta name.
_BETA_CONTENT = {"output_audio": "audio", "output_text": "text"}
# Audio format types: GA ``type`` -> beta format name.
_BETA_FORMAT_NAMES = {"audio/pcm": "pcm16", "audio/pcmu": "g711_ulaw", "audio/pcma": "g711_alaw"}

# Client event aliases (beta name -> GA name). The eleven client events kept their names from beta
# to GA, so none is needed today; the table is where a renamed one would go.
CLIENT_ALIASES: dict[str, str] = {}

# Client events of OpenAI's beta protocol alone (the openai SDK's ``beta.realtime`` union), taken
# in either dialect: ``transcription_session.update`` (the beta transcription session's update).
BETA_ONLY_CLIENT_EVENTS = ("transcription_session.update",)

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
    *BETA_ONLY_CLIENT_EVENTS,
)

_ID_ALPHABET = string.ascii_letters + string.digits
ID_LENGTH = 21  # characters after the prefix, as in OpenAI's ids ("item_C9G8pGVKYnaZu8PH5YQ9O")


def new_id(prefix: str) -> str:
    """An id shaped like OpenAI's: ``prefix`` + ``_`` + 21 letters and digits (e.g. ``item_...``)."""
    return prefix + "_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(ID_LENGTH))


def server_event(event_type: str, **fields: Any) -> dict:
    """A server event with a fresh ``event_id``."""
    return {"type": event_type, "event_id": new_id("event"), **fields}


def error_event(
    message: str,
    code: str | None = None,
    param: str | None = None,
    event_id: str | None = None,
    error_type: str = "invalid_request_error",
) -> dict:
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


def public_item(item: dict, beta: bool = False) -> dict:
    """An item as a client sees it: private bookkeeping keys (``_...``) removed and, for a beta
    session, the beta names of assistant content types (``audio``/``text``)."""
    clean = {k: v for k, v in item.items() if not k.startswith("_")}
    if "content" not in item:
        return clean  # function_call / function_call_output items have no content
    parts = []
    for part in item.get("content", []):
        view = {k: v for k, v in part.items() if not k.startswith("_")}
        if beta and view.get("type") in _BETA_CONTENT:
            view["type"] = _BETA_CONTENT[view["type"]]
        parts.append(view)
    clean["content"] = parts
    return clean


def usage(output_tokens: int, input_tokens: int = 0, cached_tokens: int = 0) -> dict:
    """``response.usage``: output tokens are the LLM tokens of the reply, whether spoken or
    written; input tokens the prompt's (0 where the engine does not count them), of which
    ``cached_tokens`` were reused rather than read (llama.cpp: the instructions, earlier turns and
    a prompt read ahead at the caller's pause)."""
    return {
        "total_tokens": input_tokens + output_tokens,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "input_token_details": {
            "text_tokens": input_tokens,
            "audio_tokens": 0,
            "image_tokens": 0,
            "cached_tokens": cached_tokens,
            "cached_tokens_details": {"text_tokens": cached_tokens, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": output_tokens, "audio_tokens": 0},
    }


def response_object(
    response_id: str,
    *,
    conversation_id: Optional[str],
    audio: bool,
    voice: str,
    max_output_tokens: int | str,
    beta: bool = False,
    status: str = "in_progress",
    output: list | None = None,
    status_details: dict | None = None,
    usage: dict | None = None,
    metadata: dict | None = None,
    output_format: Optional[dict] = None,
) -> dict:
    """The ``realtime.response`` object of ``response.created`` / ``response.done``.

    ``conversation_id`` is None for an out-of-band response (``conversation: "none"``);
    ``output_format`` the session's GA audio output format (None: PCM at 24 kHz), which a WebSocket
    client reads to size the audio deltas of the response.
    """
    output_format = output_format or {"type": "audio/pcm", "rate": 24000}
    body: dict[str, Any] = {
        "object": "realtime.response",
        "id": response_id,
        "status": status,
        "status_details": status_details,
        "output": output or [],
        "conversation_id": conversation_id,
    }
    if beta:
        body |= {
            "modalities": ["text", "audio"] if audio else ["text"],
            "voice": voice,
            "output_audio_format": _BETA_FORMAT_NAMES.get(str(output_format.get("type")), "pcm16"),
            "max_output_tokens": max_output_tokens,
        }
    else:
        body |= {
            "output_modalities": ["audio"] if audio else ["text"],
            "max_output_tokens": max_output_tokens,
            "audio": {"output": {"format": dict(output_format), "voice": voice}},
        }
    return body | {"usage": usage, "metadata": metadata}


def rate_limits(max_tokens: int) -> list[dict]:
    """``rate_limits.updated`` payload. The gateway has no account quotas: what limits a caller is
    one response at a time and the per-response token cap, and both are free again once a
    response is done (so ``remaining`` equals ``limit``)."""
    return [
        {"name": "requests", "limit": 1, "remaining": 1, "reset_seconds": 0},
        {"name": "tokens", "limit": max_tokens, "remaining": max_tokens, "reset_seconds": 0},
    ]
