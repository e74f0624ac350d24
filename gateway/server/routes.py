"""HTTP routes: signaling (OpenAI Realtime WebRTC contract and the JSON /offer), pool, health,
metrics, client secrets and the demo page."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

from aiohttp import web

from gateway.pool.pool import PoolFullError
from gateway.server.auth import bearer
from gateway.signaling.call import OfferError

log = logging.getLogger(__name__)


def _app_keys():
    from gateway.server import app as keys  # the AppKeys live beside create_app

    return keys


def error_response(status: int, message: str, code: str, error_type: str = "invalid_request_error",
                   headers: Optional[dict] = None) -> web.Response:
    """JSON error body in the OpenAI shape: {"error": {"type", "code", "message"}}."""
    body = {"error": {"type": error_type, "code": code, "message": message}}
    return web.json_response(body, status=status, headers=headers)


def _pool_full(request: web.Request, exc: Exception) -> web.Response:
    keys = _app_keys()
    retry = request.app[keys.CONFIG].retry_after_s
    request.app[keys.METRICS].calls.labels(result="pool_full").inc()
    return error_response(
        503, f"All lines are busy ({exc}); retry in {retry} s.", "pool_full", "server_busy",
        headers={"Retry-After": str(retry)},
    )


def _check_auth(request: web.Request) -> Optional[web.Response]:
    """None if the request may open a call; a 401 otherwise. Ephemeral keys are single-use."""
    keys = _app_keys()
    config = request.app[keys.CONFIG]
    if not config.api_key:
        return None
    token = bearer(request.headers.get("Authorization"))
    if token == config.api_key:
        return None
    if token and token.startswith("ek_") and request.app[keys.KEYS].consume(token):
        return None
    return error_response(401, "Missing or invalid API key: send 'Authorization: Bearer <key>'.", "invalid_api_key",
                          "authentication_error")


async def _open_call(request: web.Request, sdp: str, session: Optional[dict]):
    keys = _app_keys()
    calls = request.app[keys.CALLS]
    call, answer = await calls.create(sdp, session)
    request.app[keys.METRICS].calls.labels(result="answered").inc()
    return call, answer


async def realtime_calls(request: web.Request) -> web.Response:
    """``POST /v1/realtime/calls``: body = SDP offer (``application/sdp``) or a multipart form with
    ``sdp`` and ``session`` (JSON) fields. 201 + SDP answer + ``Location: /v1/realtime/calls/{id}``."""
    denied = _check_auth(request)
    if denied is not None:
        return denied
    session: Optional[dict] = None
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        sdp_field = form.get("sdp")
        sdp = sdp_field if isinstance(sdp_field, str) else (sdp_field.file.read().decode() if sdp_field is not None else "")
        raw_session = form.get("session")
        if raw_session is not None:
            try:
                session = json.loads(raw_session if isinstance(raw_session, str) else raw_session.file.read())
            except ValueError:
                return error_response(400, "the 'session' form field is not valid JSON", "invalid_json")
            if isinstance(session, dict) and isinstance(session.get("session"), dict):
                session = session["session"]
    else:
        sdp = await request.text()
    try:
        call, answer = await _open_call(request, sdp, session)
    except PoolFullError as exc:
        return _pool_full(request, exc)
    except OfferError as exc:
        return error_response(400, str(exc), "invalid_offer")
    return web.Response(
        status=201, text=answer, content_type="application/sdp",
        headers={"Location": f"/v1/realtime/calls/{call.id}"},
    )


async def offer_json(request: web.Request) -> web.Response:
    """``POST /offer``: {"sdp", "type": "offer"} -> {"sdp", "type": "answer", "call_id"} (the demo page's)."""
    denied = _check_auth(request)
    if denied is not None:
        return denied
    try:
        body = await request.json()
    except ValueError:
        return error_response(400, "body must be JSON {\"sdp\": ..., \"type\": \"offer\"}", "invalid_json")
    if not isinstance(body, dict) or body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
        return error_response(400, "body must be {\"sdp\": <string>, \"type\": \"offer\"}", "invalid_offer")
    try:
        call, answer = await _open_call(request, body["sdp"], body.get("session") if isinstance(body.get("session"), dict) else None)
    except PoolFullError as exc:
        return _pool_full(request, exc)
    except OfferError as exc:
        return error_response(400, str(exc), "invalid_offer")
    return web.json_response({"sdp": answer, "type": "answer", "call_id": call.id})


async def hangup(request: web.Request) -> web.Response:
    """``DELETE /v1/realtime/calls/{id}`` or ``POST .../hangup``: end the call and drain its unit."""
    denied = _check_auth_plain(request)
    if denied is not None:
        return denied
    call_id = request.match_info["call_id"]
    if not await request.app[_app_keys().CALLS].hangup(call_id):
        return error_response(404, f"no call {call_id}", "call_not_found")
    return web.json_response({"call_id": call_id, "status": "ended"})


def _check_auth_plain(request: web.Request) -> Optional[web.Response]:
    """Hang-up needs the API key (not an ephemeral one) when one is configured — or the call id."""
    return None  # the call id is an unguessable capability (as OpenAI's call ids are)


async def client_secrets(request: web.Request) -> web.Response:
    """``POST /v1/realtime/client_secrets``: mint an ``ek_`` key (GA flow); needs the API key if set."""
    keys = _app_keys()
    config = request.app[keys.CONFIG]
    if config.api_key and bearer(request.headers.get("Authorization")) != config.api_key:
        return error_response(401, "Missing or invalid API key.", "invalid_api_key", "authentication_error")
    ttl = 60
    session = None
    if request.can_read_body:
        try:
            body = await request.json()
        except ValueError:
            return error_response(400, "body must be JSON", "invalid_json")
        if isinstance(body, dict):
            anchor = (body.get("expires_after") or {}).get("seconds") if isinstance(body.get("expires_after"), dict) else None
            if anchor is not None:
                if not isinstance(anchor, int) or not 10 <= anchor <= 7200:
                    return error_response(400, "'expires_after.seconds' must be 10..7200", "invalid_value")
                ttl = anchor
            session = body.get("session")
    value, expires_at = request.app[keys.KEYS].mint(ttl)
    return web.json_response({"value": value, "expires_at": expires_at, "session": session or {"type": "realtime"}})


async def pool_status(request: web.Request) -> web.Response:
    return web.json_response(request.app[_app_keys().POOL].snapshot())


async def healthz(request: web.Request) -> web.Response:
    keys = _app_keys()
    if keys.POOL not in request.app or keys.MODELS not in request.app:
        return web.json_response({"status": "starting"}, status=503)
    pool = request.app[keys.POOL]
    return web.json_response({"status": "ok", "pool_size": len(pool.units), "idle": pool.snapshot()["totals"]["idle"]})


async def metrics(request: web.Request) -> web.Response:
    body = request.app[_app_keys().METRICS].render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


@web.middleware
async def cors_middleware(request: web.Request, handler):
    """CORS for the origins in ``allowed_origins`` (``*`` allowed): preflight, and ``Location``
    exposed so browser Realtime clients can read the call id."""
    origins = request.app[_app_keys().CONFIG].origins
    origin = request.headers.get("Origin")
    allowed = bool(origin) and ("*" in origins or origin in origins)
    if request.method == "OPTIONS" and allowed and request.headers.get("Access-Control-Request-Method"):
        response = web.Response(status=204)
        response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
        response.headers["Access-Control-Allow-Headers"] = request.headers.get(
            "Access-Control-Request-Headers", "Authorization, Content-Type"
        )
        response.headers["Access-Control-Max-Age"] = "600"
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = exc
    if allowed:
        response.headers["Access-Control-Allow-Origin"] = "*" if "*" in origins else origin
        response.headers["Access-Control-Expose-Headers"] = "Location, Retry-After"
        if "*" not in origins:
            response.headers["Vary"] = "Origin"
    if isinstance(response, web.HTTPException) and response.status >= 400:
        raise response
    return response


def add_routes(app: web.Application, static_dir: Path) -> None:
    async def index(request: web.Request) -> web.StreamResponse:
        page = static_dir / "index.html"
        if not page.exists():
            return error_response(404, "demo page not found (static/index.html)", "not_found")
        return web.FileResponse(page)

    app.router.add_post("/v1/realtime/calls", realtime_calls)
    app.router.add_delete("/v1/realtime/calls/{call_id}", hangup)
    app.router.add_post("/v1/realtime/calls/{call_id}/hangup", hangup)
    app.router.add_post("/v1/realtime/client_secrets", client_secrets)
    app.router.add_post("/offer", offer_json)
    app.router.add_get("/v1/pool", pool_status)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    if static_dir.is_dir():
        app.router.add_static("/static/", static_dir)
