"""HTTP routes: signaling (the OpenAI Realtime WebRTC contract and the demo page's JSON
``/offer``), hang-up, client secrets and the demo page; the operator routes (pool, usage, health,
metrics) are :mod:`gateway.server.ops_routes`.

Handlers raise :class:`ApiError`; :mod:`gateway.server.middleware` renders it (and any other
error) as ``{"error": {"type", "code", "message", "param"}}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from aiohttp import web

from gateway.server.admission import open_call
from gateway.server.app_keys import CONFIG, KEYS, SESSIONS
from gateway.server.auth import DEFAULT_TTL_S, MAX_TTL_S, MIN_TTL_S, KeyLimitError, bearer, require_api_key
from gateway.server.errors import ApiError
from gateway.server.offers import parse_json, read_calls_offer, read_json_offer, read_text, session_update
from gateway.server.ops_routes import add_ops_routes
from gateway.server.sip_routes import add_sip_routes
from gateway.server.static_files import add_static_routes
from gateway.server.websocket_routes import add_websocket_routes


async def realtime_calls(request: web.Request) -> web.Response:
    """``POST /v1/realtime/calls``: body = SDP offer (``application/sdp``), a ``multipart/form-data``
    form with ``sdp`` and ``session`` (JSON) fields, or JSON ``{"sdp", "session"}``
    (:func:`read_calls_offer`; another Content-Type: 415).
    201 + SDP answer (``application/sdp``) + ``Location: /v1/realtime/calls/{call_id}``."""
    call, answer = await open_call(request, read_calls_offer)
    return web.Response(
        status=201,
        text=answer,
        content_type="application/sdp",
        headers={"Location": f"/v1/realtime/calls/{call.id}"},
    )


async def offer_json(request: web.Request) -> web.Response:
    """``POST /offer`` (``application/json``): {"sdp", "type": "offer"} -> {"sdp", "type": "answer",
    "call_id"} (the demo page's)."""
    call, answer = await open_call(request, read_json_offer)
    return web.json_response({"sdp": answer, "type": "answer", "call_id": call.id})


async def hangup(request: web.Request) -> web.Response:
    """``DELETE /v1/realtime/calls/{call_id}`` or ``POST .../hangup``: end the call (a live session
    of any transport) and drain its unit; 200 ``{"call_id", "status": "ended"}``, 404
    ``call_not_found``; 401 without the API key when one is configured (as OpenAI's hang-up
    wants it, and as every other ``/v1/realtime/*`` route: a SIP call's id is in its webhook)."""
    token = bearer(request.headers.get("Authorization"))
    require_api_key(request.app[CONFIG].api_key, token, "Hanging up a call")
    call_id = request.match_info["call_id"]
    if not await request.app[SESSIONS].hangup(call_id):
        raise ApiError(404, f"no call {call_id}", "call_not_found")
    return web.json_response({"call_id": call_id, "status": "ended"})


async def client_secrets(request: web.Request) -> web.Response:
    """``POST /v1/realtime/client_secrets``: mint an ``ek_`` key (GA flow); needs the API key if set.

    Body (optional): ``{"expires_after": {"anchor": "created_at", "seconds": 10..7200},
    "session": {...}}``; the session config is validated now and applied to the call the key
    opens. 200 ``{"value", "expires_at", "session"}``; 401, 400, 429 with ``Retry-After``.
    """
    config = request.app[CONFIG]
    require_api_key(config.api_key, bearer(request.headers.get("Authorization")), "Minting a client secret")
    body: Any = {}
    if request.can_read_body:
        try:
            body = parse_json(await read_text(request))
        except ValueError:
            raise ApiError(400, "body must be JSON", "invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object", "invalid_type")
    ttl_s = _ttl_s(body.get("expires_after"))
    update = session_update(request, body.get("session"))  # checked now, against the configured limits
    try:
        value, expires_at = request.app[KEYS].mint(ttl_s, update)
    except KeyLimitError as exc:
        raise ApiError(
            429,
            f"Too many unexpired ephemeral keys; retry in {exc.retry_after_s} s.",
            "rate_limit_exceeded",
            "rate_limit_error",
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None
    session_shown = dict(update.session) if update is not None else {"type": "realtime"}
    return web.json_response({"value": value, "expires_at": expires_at, "session": session_shown})


def _ttl_s(expires_after: Any) -> int:
    """Seconds an ephemeral key lives, from ``expires_after`` (default 60). Raises ApiError (400)."""
    if expires_after is None:
        return DEFAULT_TTL_S
    seconds = expires_after.get("seconds") if isinstance(expires_after, dict) else None
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not MIN_TTL_S <= seconds <= MAX_TTL_S:
        raise ApiError(
            400,
            f"'expires_after.seconds' must be an integer {MIN_TTL_S}..{MAX_TTL_S}",
            "invalid_value",
            param="expires_after.seconds",
        )
    return seconds


def add_routes(app: web.Application, static_dir: Optional[Path]) -> None:
    """Register every route of the HTTP API on ``app``; ``static_dir`` holds the demo page
    (:func:`add_static_routes`; None: ``GET /`` answers 404 JSON)."""
    app.router.add_post("/v1/realtime/calls", realtime_calls)
    app.router.add_delete("/v1/realtime/calls/{call_id}", hangup)
    app.router.add_post("/v1/realtime/calls/{call_id}/hangup", hangup)
    app.router.add_post("/v1/realtime/client_secrets", client_secrets)
    app.router.add_post("/offer", offer_json)
    add_ops_routes(app)  # /v1/pool, /v1/usage, /healthz, /metrics
    add_websocket_routes(app)
    add_sip_routes(app)
    add_static_routes(app, static_dir)
