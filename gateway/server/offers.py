"""Reading an SDP offer, and the session config sent with it, out of an HTTP request.

The bodies accepted:

- ``POST /v1/realtime/calls`` (OpenAI Realtime WebRTC contract): the SDP offer itself
  (``application/sdp``, RFC 8866 text); a form (``multipart/form-data`` as OpenAI's unified
  interface and a browser's ``FormData`` send it, or ``application/x-www-form-urlencoded``) with an
  ``sdp`` field and an optional ``session`` field (JSON text); or JSON ``{"sdp": "...",
  "session": {...}}`` (``application/json``, what the OpenAI Python SDK's
  ``client.realtime.calls.create(sdp=..., session=...)`` sends).
- ``POST /offer`` (the demo page): JSON ``{"sdp": "...", "type": "offer", "session"?: {...}}``,
  the shape of an ``RTCSessionDescriptionInit`` (W3C WebRTC, JSEP RFC 8829).

A session config is a Realtime session object (GA or beta shape), validated as a
``session.update`` would be. Every problem is an :class:`ApiError` (400).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from aiohttp import web

from gateway.realtime.session_config import SessionConfigError, parse_update
from gateway.server.errors import ApiError

_FORM_TYPES = ("multipart/", "application/x-www-form-urlencoded")


@dataclass(frozen=True)
class Offer:
    """An SDP offer as received (not checked yet: signaling does that) and the session config sent
    with it (None when there is none)."""

    sdp: str
    session_config: Optional[dict[str, Any]] = None


async def read_text(request: web.Request) -> str:
    """The request body as text in its declared charset (UTF-8 by default). Raises ApiError (400
    ``invalid_encoding``) when it does not decode, instead of the 500 that ``request.text()``
    would end in; a body over the app's ``client_max_size`` raises aiohttp's 413."""
    body = await request.read()
    charset = request.charset or "utf-8"
    try:
        return body.decode(charset)
    except LookupError:
        raise ApiError(400, f"Unknown charset {charset[:40]!r} in Content-Type.", "invalid_encoding") from None
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, f"The body is not valid {charset[:40]} text (byte {exc.start}).", "invalid_encoding"
        ) from None


def checked_session_config(session_config: Any, field: str) -> Optional[dict[str, Any]]:
    """A session config sent with an offer or a client_secrets request (``field`` names where it
    came from), validated as a ``session.update`` would be; a ``{"session": {...}}`` wrapper is
    unwrapped. None stays None. Raises ApiError (400) naming the bad field in ``param``."""
    if session_config is None:
        return None
    if isinstance(session_config, dict) and isinstance(session_config.get("session"), dict):
        session_config = session_config["session"]  # the {"session": {...}} wrapper some clients send
    try:
        parse_update(session_config)
    except SessionConfigError as exc:
        raise ApiError(400, f"'{field}': {exc}", exc.code, param=exc.param) from None
    return session_config


async def read_calls_offer(request: web.Request) -> Offer:
    """The offer of a ``POST /v1/realtime/calls`` body, by its Content-Type: a form, JSON, else
    the SDP text itself. Raises ApiError (400) for a body that does not decode, a malformed form
    or JSON body, or a bad session config."""
    if request.content_type.startswith(_FORM_TYPES):
        return await _read_form_offer(request)
    if request.content_type == "application/json":
        return await _read_sdk_offer(request)
    return Offer(await read_text(request))


async def read_json_offer(request: web.Request) -> Offer:
    """The offer of a ``POST /offer`` JSON body ``{"sdp", "type": "offer", "session"?}``.
    Raises ApiError (400 ``invalid_json``, ``invalid_offer``, ``invalid_type``, ``invalid_value``)."""
    try:
        body = json.loads(await read_text(request))
    except ValueError:
        raise ApiError(400, 'body must be JSON {"sdp": ..., "type": "offer"}', "invalid_json") from None
    if not isinstance(body, dict) or body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
        raise ApiError(400, 'body must be {"sdp": <string>, "type": "offer"}', "invalid_offer")
    return Offer(body["sdp"], _json_session_config(body))


async def _read_sdk_offer(request: web.Request) -> Offer:
    """``{"sdp": <string>, "session"?: {...}}``, the JSON body of the OpenAI SDKs'
    ``realtime.calls.create``. Raises ApiError (400)."""
    try:
        body = json.loads(await read_text(request))
    except ValueError:
        raise ApiError(400, 'body must be JSON {"sdp": <string>, "session": {...}}', "invalid_json") from None
    if not isinstance(body, dict) or not isinstance(body.get("sdp"), str):
        raise ApiError(
            400, 'body must be {"sdp": <string>, "session": {...}} (session optional)', "invalid_offer", param="sdp"
        )
    return Offer(body["sdp"], _json_session_config(body))


def _json_session_config(body: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The checked ``session`` of a JSON offer body. Raises ApiError (400 ``invalid_type`` when it
    is no object, else as :func:`checked_session_config`)."""
    session_config = body.get("session")
    if session_config is not None and not isinstance(session_config, dict):
        raise ApiError(400, "'session' must be a JSON object.", "invalid_type", param="session")
    return checked_session_config(session_config, "session")


async def _read_form_offer(request: web.Request) -> Offer:
    """The ``sdp`` and ``session`` (JSON text) fields of a multipart or urlencoded form; a missing
    ``sdp`` reads as an empty offer. Raises ApiError (400 ``invalid_form``, ``invalid_json``,
    ``invalid_type``, ``invalid_value``)."""
    try:
        form = await request.post()
    except (ValueError, LookupError, AssertionError) as exc:  # no boundary, broken parts, bad charset
        raise ApiError(400, f"Malformed form body: {exc}"[:300], "invalid_form") from None
    sdp = _form_text(form.get("sdp"))
    raw_session = form.get("session")
    if raw_session is None:
        return Offer(sdp)
    try:
        session_config = json.loads(_form_text(raw_session))
    except ValueError:
        raise ApiError(400, "The 'session' form field is not valid JSON.", "invalid_json", param="session") from None
    if not isinstance(session_config, dict):
        raise ApiError(400, "The 'session' form field must be a JSON object.", "invalid_type", param="session")
    return Offer(sdp, checked_session_config(session_config, "session"))


def _form_text(field: Any) -> str:
    """A form field as text: aiohttp gives str (text parts), bytes (parts with a content type,
    e.g. ``application/sdp``) or a FileField (parts with a file name, e.g. a browser Blob)."""
    if field is None:
        return ""
    if isinstance(field, str):
        return field
    data = bytes(field) if isinstance(field, (bytes, bytearray)) else field.file.read()
    return data.decode("utf-8", "replace")
