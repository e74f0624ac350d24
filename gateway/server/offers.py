"""Reading an SDP offer, and the session config sent with it, out of an HTTP request.

The bodies accepted:

- ``POST /v1/realtime/calls`` (OpenAI Realtime WebRTC contract): the SDP offer itself
  (``application/sdp``, RFC 8866 text); a form (``multipart/form-data``, as OpenAI's unified
  interface and a browser's ``FormData`` send it) with an ``sdp`` field and an optional ``session``
  field (JSON text); or JSON ``{"sdp": "...", "session": {...}}`` (``application/json``, what the
  OpenAI Python SDK's ``client.realtime.calls.create(sdp=..., session=...)`` sends).
- ``POST /offer`` (the demo page): JSON ``{"sdp": "...", "type": "offer", "session"?: {...}}``,
  the shape of an ``RTCSessionDescriptionInit`` (W3C WebRTC, JSEP RFC 8829).

Any other Content-Type (none, ``text/plain``, ``application/x-www-form-urlencoded``: what a web
page may send anywhere without a CORS preflight) gets 415 ``unsupported_media_type``.

A session config is a Realtime session object (GA or beta shape), parsed here, once, against the
configured session limits (``app[LIMITS]``) into a :class:`SessionUpdate`. A body problem is an
:class:`ApiError` (400); a bad session config a ``ClientError``, which the error middleware answers
with a 400 naming the field (``param``) and the limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from aiohttp import web

from gateway.realtime.client_messages import MAX_NESTING, nesting, repair_decoded
from gateway.realtime.events import GATEWAY_EVENTS
from gateway.realtime.session_update import SessionUpdate
from gateway.server.app_keys import LIMITS
from gateway.server.errors import ApiError

CALLS_TYPES = ("application/sdp", "multipart/form-data", "application/json")


@dataclass(frozen=True)
class Offer:
    """An SDP offer as received (not checked yet: the WebRTC leg does that) and the session config sent
    with it, parsed (None when there is none)."""

    sdp: str
    update: Optional[SessionUpdate] = None


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


def parse_json(text: str) -> Any:
    """``text`` as JSON; ValueError for anything the caller should answer 400 ``invalid_json``:
    not JSON, an integer of more digits than Python converts, or arrays and objects nested more
    than ``MAX_NESTING`` deep (past the parser's recursion limit ``json.loads`` raises
    ``RecursionError``, which ended in a 500 and a traceback). Lone surrogates in its strings
    become U+FFFD, as in a client event (``client_messages.repair_decoded``): one in the
    ``instructions`` of a session config sent over HTTP reached the LLM, whose read-ahead of them
    failed (its UTF-8 encoder raised)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if nesting(value) > MAX_NESTING:
        raise ValueError(f"nested more than {MAX_NESTING} deep")
    return repair_decoded(value, text)


def session_update(request: web.Request, session_config: Any) -> Optional[SessionUpdate]:
    """A session config sent with an offer or a client_secrets request, parsed against the
    configured limits (a ``{"session": {...}}`` wrapper unwrapped; None stays None). Raises
    ClientError (400 through the error middleware) naming the bad field in ``param``."""
    return SessionUpdate.from_request(session_config, request.app[LIMITS])


def requested_extensions(request: web.Request) -> frozenset[str]:
    """The gateway's own server events the client asks for: ``?gateway_events=gateway.latency``
    (comma-separated names of ``GATEWAY_EVENTS``) in the query of an offer or a WebSocket URL; none
    by default, so a stock client sees only OpenAI's events. Raises ApiError (400 ``invalid_value``,
    ``param`` ``gateway_events``) for a name that is no gateway event."""
    names = frozenset(name.strip() for name in request.query.get("gateway_events", "").split(",") if name.strip())
    unknown = sorted(names - GATEWAY_EVENTS)
    if unknown:
        known = ", ".join(sorted(GATEWAY_EVENTS))
        raise ApiError(
            400, f"Unknown gateway event {unknown[0][:60]!r} (known: {known}).", "invalid_value", param="gateway_events"
        )
    return names


def require_content_type(request: web.Request, accepted: tuple[str, ...]) -> None:
    """Raises ApiError 415 ``unsupported_media_type`` unless the body's Content-Type (parameters
    such as ``charset`` aside) is one of ``accepted``."""
    if request.content_type not in accepted:
        shown = request.headers.get("Content-Type", "none")[:80]
        raise ApiError(
            415,
            f"Content-Type {shown!r} is not accepted here: send {', '.join(accepted)}.",
            "unsupported_media_type",
        )


async def read_calls_offer(request: web.Request) -> Offer:
    """The offer of a ``POST /v1/realtime/calls`` body, by its Content-Type (:data:`CALLS_TYPES`):
    a form, JSON or the SDP text itself. Raises ApiError (415 for another type; 400 for a body that
    does not decode, a malformed form or JSON body, or a bad session config)."""
    require_content_type(request, CALLS_TYPES)
    if request.content_type == "multipart/form-data":
        return await _read_form_offer(request)
    if request.content_type == "application/json":
        return await _read_sdk_offer(request)
    return Offer(await read_text(request))


async def read_json_offer(request: web.Request) -> Offer:
    """The offer of a ``POST /offer`` JSON body ``{"sdp", "type": "offer", "session"?}``.
    Raises ApiError (415 unless ``application/json``; 400 ``invalid_json``, ``invalid_offer``,
    ``invalid_type``, ``invalid_value``)."""
    require_content_type(request, ("application/json",))
    try:
        body = parse_json(await read_text(request))
    except ValueError:
        raise ApiError(400, 'body must be JSON {"sdp": ..., "type": "offer"}', "invalid_json") from None
    if not isinstance(body, dict) or body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
        raise ApiError(400, 'body must be {"sdp": <string>, "type": "offer"}', "invalid_offer")
    return Offer(body["sdp"], _json_session_config(request, body))


async def _read_sdk_offer(request: web.Request) -> Offer:
    """``{"sdp": <string>, "session"?: {...}}``, the JSON body of the OpenAI SDKs'
    ``realtime.calls.create``. Raises ApiError (400)."""
    try:
        body = parse_json(await read_text(request))
    except ValueError:
        raise ApiError(400, 'body must be JSON {"sdp": <string>, "session": {...}}', "invalid_json") from None
    if not isinstance(body, dict) or not isinstance(body.get("sdp"), str):
        raise ApiError(
            400, 'body must be {"sdp": <string>, "session": {...}} (session optional)', "invalid_offer", param="sdp"
        )
    return Offer(body["sdp"], _json_session_config(request, body))


def _json_session_config(request: web.Request, body: dict[str, Any]) -> Optional[SessionUpdate]:
    """The parsed ``session`` of a JSON offer body. Raises ApiError (400 ``invalid_type`` when it
    is no object), else as :func:`session_update`."""
    session_config = body.get("session")
    if session_config is not None and not isinstance(session_config, dict):
        raise ApiError(400, "'session' must be a JSON object.", "invalid_type", param="session")
    return session_update(request, session_config)


async def _read_form_offer(request: web.Request) -> Offer:
    """The ``sdp`` and ``session`` (JSON text) fields of a multipart form; a missing
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
        session_config = parse_json(_form_text(raw_session))
    except ValueError:
        raise ApiError(400, "The 'session' form field is not valid JSON.", "invalid_json", param="session") from None
    if not isinstance(session_config, dict):
        raise ApiError(400, "The 'session' form field must be a JSON object.", "invalid_type", param="session")
    return Offer(sdp, session_update(request, session_config))


def _form_text(field: Any) -> str:
    """A form field as text: aiohttp gives str (text parts), bytes (parts with a content type,
    e.g. ``application/sdp``) or a FileField (parts with a file name, e.g. a browser Blob)."""
    if field is None:
        return ""
    if isinstance(field, str):
        return field
    data = bytes(field) if isinstance(field, (bytes, bytearray)) else field.file.read()
    return data.decode("utf-8", "replace")
