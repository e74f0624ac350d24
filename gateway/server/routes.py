"""HTTP routes: signaling (OpenAI Realtime WebRTC contract and the JSON /offer), pool, health,
metrics, client secrets and the demo page."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from aiohttp import web

from gateway.pool.pool import PoolFullError
from gateway.realtime.session_config import SessionConfigError, parse_update
from gateway.server.auth import DEFAULT_TTL_S, MAX_TTL_S, MIN_TTL_S, Grant, KeyLimitError, bearer, same_key
from gateway.signaling.call import OfferError

log = logging.getLogger(__name__)


def _app_keys():
    from gateway.server import app as keys  # the AppKeys live beside create_app

    return keys


def error_response(status: int, message: str, code: str, error_type: str = "invalid_request_error",
                   headers: Optional[dict] = None, param: Optional[str] = None) -> web.Response:
    """JSON error body in the OpenAI shape: {"error": {"type", "code", "message", "param"}}."""
    body = {"error": {"type": error_type, "code": code, "message": message, "param": param}}
    return web.json_response(body, status=status, headers=headers)


def _pool_full(request: web.Request, exc: Exception) -> web.Response:
    keys = _app_keys()
    retry = request.app[keys.CONFIG].retry_after_s
    request.app[keys.METRICS].calls.labels(result="pool_full").inc()
    return error_response(
        503, f"All lines are busy ({exc}); retry in {retry} s.", "pool_full", "server_busy",
        headers={"Retry-After": str(retry)},
    )


class _Denied(Exception):
    """The request may not open a call; ``response`` says why (401 or 400)."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(response.status)
        self.response = response


@dataclass
class _Admission:
    """A request allowed to open a call, and the ephemeral key it used (refunded if the call fails)."""

    key: Optional[str] = None
    grant: Optional[Grant] = None

    def refund(self, request: web.Request) -> None:
        """Give the ephemeral key back (its call was not opened); nothing for an API key."""
        if self.key is not None and self.grant is not None:
            request.app[_app_keys().KEYS].refund(self.key, self.grant)


def _admit(request: web.Request) -> _Admission:
    """Who may open a call: anyone when no API key is configured, else a bearer of the API key or
    of an unused, unexpired ephemeral key (taken now: single use). Raises _Denied (401)."""
    keys = _app_keys()
    config = request.app[keys.CONFIG]
    token = bearer(request.headers.get("Authorization"))
    if config.api_key and same_key(token, config.api_key):
        return _Admission()
    grant = request.app[keys.KEYS].consume(token) if token and token.startswith("ek_") else None
    if grant is not None:
        return _Admission(token, grant)
    if not config.api_key:
        return _Admission()
    reason = "Missing API key" if token is None else "Invalid, used or expired API key"
    raise _Denied(error_response(401, f"{reason}: send 'Authorization: Bearer <API key or ephemeral key>'.",
                                 "invalid_api_key", "authentication_error"))


def _checked_session(session: Any, field: str) -> Optional[dict]:
    """A session config sent with an offer or a client_secrets request, validated as a
    ``session.update`` would be. Raises _Denied (400) naming the bad field."""
    if session is None:
        return None
    if isinstance(session, dict) and isinstance(session.get("session"), dict):
        session = session["session"]  # the {"session": {...}} wrapper some clients send
    try:
        parse_update(session)
    except SessionConfigError as exc:
        raise _Denied(error_response(400, f"'{field}': {exc}", "invalid_value", param=exc.param)) from None
    return session


def _merged(base: Optional[dict], override: Optional[dict]) -> Optional[dict]:
    """``override`` on top of ``base``, nested objects merged key by key."""
    if base is None or override is None:
        return override if base is None else base
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merged(merged.get(key), value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


async def _open_call(request: web.Request, admission: _Admission, sdp: str, session: Optional[dict]):
    """Open the call; the ephemeral key's session comes first, the offer's session on top.
    Raises _Denied (400 bad offer, 503 pool full), refunding the key."""
    keys = _app_keys()
    calls = request.app[keys.CALLS]
    session = _merged(admission.grant.session if admission.grant else None, session)
    try:
        call, answer = await calls.create(sdp, session)
    except PoolFullError as exc:
        admission.refund(request)
        raise _Denied(_pool_full(request, exc)) from None
    except OfferError as exc:
        admission.refund(request)
        raise _Denied(error_response(400, str(exc), "invalid_offer")) from None
    except BaseException:  # a server fault (or the client gone): no call, so the key is not used up
        admission.refund(request)
        raise
    request.app[keys.METRICS].calls.labels(result="answered").inc()
    return call, answer


async def _admit_and_open(request: web.Request, read_offer) -> tuple[Any, str]:
    """Check the caller, read the offer with ``read_offer(request)`` -> (sdp, session), open the
    call. Raises _Denied; an ephemeral key is given back whenever no call came of it."""
    admission = _admit(request)
    try:
        sdp, session = await read_offer(request)
    except BaseException:  # refused, or the body never came in full
        admission.refund(request)
        raise
    return await _open_call(request, admission, sdp, session)


async def _body_text(request: web.Request) -> str:
    """The request body as text in its declared charset (UTF-8 by default). Raises _Denied (400)
    when it does not decode, instead of the 500 that ``request.text()`` would end in."""
    body = await request.read()
    charset = request.charset or "utf-8"
    try:
        return body.decode(charset)
    except LookupError:
        raise _Denied(error_response(400, f"Unknown charset {charset[:40]!r} in Content-Type.", "invalid_encoding")) from None
    except UnicodeDecodeError as exc:
        raise _Denied(error_response(400, f"The body is not valid {charset[:40]} text (byte {exc.start}).",
                                     "invalid_encoding")) from None


async def _read_offer(request: web.Request) -> tuple[str, Optional[dict]]:
    """(SDP, session) of a ``/v1/realtime/calls`` body: ``application/sdp`` text, or a form
    (multipart, as OpenAI's unified interface sends, or urlencoded) with ``sdp`` and ``session``
    (JSON) fields. Raises _Denied (400) for a body that does not decode or a malformed form."""
    if not request.content_type.startswith(("multipart/", "application/x-www-form-urlencoded")):
        return await _body_text(request), None
    try:
        form = await request.post()
    except (ValueError, LookupError, AssertionError) as exc:  # no boundary, broken parts, bad charset
        raise _Denied(error_response(400, f"Malformed form body: {exc}"[:300], "invalid_form")) from None
    sdp = _form_text(form.get("sdp"))
    raw_session = form.get("session")
    if raw_session is None:
        return sdp, None
    try:
        session = json.loads(_form_text(raw_session))
    except ValueError:
        raise _Denied(error_response(400, "The 'session' form field is not valid JSON.", "invalid_json",
                                     param="session")) from None
    if not isinstance(session, dict):
        raise _Denied(error_response(400, "The 'session' form field must be a JSON object.", "invalid_type", param="session"))
    return sdp, _checked_session(session, "session")


def _form_text(field: Any) -> str:
    """A form field as text: aiohttp gives str (text parts), bytes (parts with a content type,
    e.g. ``application/sdp``) or a FileField (parts with a file name, e.g. a browser Blob)."""
    if field is None:
        return ""
    if isinstance(field, str):
        return field
    data = bytes(field) if isinstance(field, (bytes, bytearray)) else field.file.read()
    return data.decode("utf-8", "replace")


async def realtime_calls(request: web.Request) -> web.Response:
    """``POST /v1/realtime/calls``: body = SDP offer (``application/sdp``) or a multipart form with
    ``sdp`` and ``session`` (JSON) fields. 201 + SDP answer + ``Location: /v1/realtime/calls/{id}``."""
    try:
        call, answer = await _admit_and_open(request, _read_offer)
    except _Denied as denied:
        return denied.response
    return web.Response(
        status=201, text=answer, content_type="application/sdp",
        headers={"Location": f"/v1/realtime/calls/{call.id}"},
    )


async def offer_json(request: web.Request) -> web.Response:
    """``POST /offer``: {"sdp", "type": "offer"} -> {"sdp", "type": "answer", "call_id"} (the demo page's)."""
    try:
        call, answer = await _admit_and_open(request, _read_json_offer)
    except _Denied as denied:
        return denied.response
    return web.json_response({"sdp": answer, "type": "answer", "call_id": call.id})


async def _read_json_offer(request: web.Request) -> tuple[str, Optional[dict]]:
    """(SDP, session) of a ``POST /offer`` JSON body. Raises _Denied (400)."""
    try:
        body = json.loads(await _body_text(request))
    except ValueError:
        raise _Denied(error_response(400, "body must be JSON {\"sdp\": ..., \"type\": \"offer\"}", "invalid_json")) from None
    if not isinstance(body, dict) or body.get("type") != "offer" or not isinstance(body.get("sdp"), str):
        raise _Denied(error_response(400, "body must be {\"sdp\": <string>, \"type\": \"offer\"}", "invalid_offer"))
    session = body.get("session")
    if session is not None and not isinstance(session, dict):
        raise _Denied(error_response(400, "'session' must be a JSON object.", "invalid_type", param="session"))
    return body["sdp"], _checked_session(session, "session")


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
    """``POST /v1/realtime/client_secrets``: mint an ``ek_`` key (GA flow); needs the API key if set.

    Body (optional): ``{"expires_after": {"anchor": "created_at", "seconds": 10..7200},
    "session": {...}}``; the session config is validated now and applied to the call the key opens.
    """
    keys = _app_keys()
    config = request.app[keys.CONFIG]
    if config.api_key and not same_key(bearer(request.headers.get("Authorization")), config.api_key):
        return error_response(401, "Missing or invalid API key.", "invalid_api_key", "authentication_error")
    body: Any = {}
    if request.can_read_body:
        try:
            body = json.loads(await _body_text(request))
        except _Denied as denied:
            return denied.response
        except ValueError:
            return error_response(400, "body must be JSON", "invalid_json")
    if not isinstance(body, dict):
        return error_response(400, "body must be a JSON object", "invalid_type")
    try:
        ttl = _ttl(body.get("expires_after"))
        session = _checked_session(body.get("session"), "session")
    except _Denied as denied:
        return denied.response
    try:
        value, expires_at = request.app[keys.KEYS].mint(ttl, session)
    except KeyLimitError as exc:
        return error_response(429, f"Too many unexpired ephemeral keys; retry in {exc.retry_after_s} s.",
                              "rate_limit_exceeded", "rate_limit_error", headers={"Retry-After": str(exc.retry_after_s)})
    return web.json_response({"value": value, "expires_at": expires_at, "session": session or {"type": "realtime"}})


def _ttl(expires_after: Any) -> int:
    """Seconds an ephemeral key lives, from ``expires_after`` (default 60). Raises _Denied (400)."""
    if expires_after is None:
        return DEFAULT_TTL_S
    seconds = expires_after.get("seconds") if isinstance(expires_after, dict) else None
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not MIN_TTL_S <= seconds <= MAX_TTL_S:
        raise _Denied(error_response(400, f"'expires_after.seconds' must be an integer {MIN_TTL_S}..{MAX_TTL_S}",
                                     "invalid_value", param="expires_after.seconds"))
    return seconds


async def pool_status(request: web.Request) -> web.Response:
    """``GET /v1/pool``: each unit's state and timings (:meth:`UnitPool.snapshot`).

    A call id is the capability to hang the call up (``DELETE /v1/realtime/calls/{id}`` needs no
    key), so this unauthenticated view shows only its first 8 hex digits, enough to match the logs.
    """
    snapshot = request.app[_app_keys().POOL].snapshot()
    for unit in snapshot["units"]:
        if unit.get("session_id"):
            unit["session_id"] = redact_call_id(unit["session_id"])
    return web.json_response(snapshot)


def redact_call_id(call_id: str) -> str:
    """``rtc_0123abcd...``: the call id's prefix, useless to hang up the call with."""
    return call_id[:12] + "..."


async def healthz(request: web.Request) -> web.Response:
    """``GET /healthz``: 200 ``{"status": "ok", "pool_size", "idle"}`` once the models are loaded
    and the pool exists, else 503 ``{"status": "starting"}``."""
    keys = _app_keys()
    if keys.POOL not in request.app or keys.MODELS not in request.app:
        return web.json_response({"status": "starting"}, status=503)
    pool = request.app[keys.POOL]
    return web.json_response({"status": "ok", "pool_size": len(pool.units), "idle": pool.snapshot()["totals"]["idle"]})


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: Prometheus text format 0.0.4 (calls, call ends, units by state, turn
    latency per stage in ms)."""
    body = request.app[_app_keys().METRICS].render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


_HTTP_ERROR_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}


def _json_http_error(request: web.Request, exc: web.HTTPException) -> web.StreamResponse:
    """aiohttp's own errors (404, 405, 413 body too large, ...) in the JSON error shape of every
    other error, keeping their headers (``Allow`` of a 405). Redirects and successes pass as they are."""
    if exc.status < 400:
        return exc
    if exc.status == 413:
        limit = request.app[_app_keys().CONFIG].max_offer_bytes
        message = f"Request body too large (an SDP offer may have up to {limit} bytes)."
    else:
        message = exc.text or exc.reason
    headers = {name: value for name, value in exc.headers.items()
               if name.lower() not in ("content-type", "content-length")}
    return error_response(exc.status, message, _HTTP_ERROR_CODES.get(exc.status, "http_error"), headers=headers)


CLIENT_HEADERS = "Authorization, Content-Type, OpenAI-Beta, OpenAI-Organization, OpenAI-Project, X-OpenAI-Agents-SDK"


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
        # What the browser asks for is allowed (the origin is what CORS trusts); without a list,
        # the headers OpenAI Realtime clients send (Agents SDK, openai-js in a browser).
        response.headers["Access-Control-Allow-Headers"] = request.headers.get(
            "Access-Control-Request-Headers", CLIENT_HEADERS
        )
        response.headers["Access-Control-Max-Age"] = "600"
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = _json_http_error(request, exc)
        except Exception:  # a bug: the client still gets the error shape it parses, the server goes on
            log.exception("%s %s failed", request.method, request.path)
            response = error_response(500, "The server failed to handle the request.", "server_error", "server_error")
    if allowed:
        response.headers["Access-Control-Allow-Origin"] = "*" if "*" in origins else origin
        response.headers["Access-Control-Expose-Headers"] = "Location, Retry-After"
        if "*" not in origins:
            response.headers["Vary"] = "Origin"
    if isinstance(response, web.HTTPException) and response.status >= 400:
        raise response
    return response


def add_routes(app: web.Application, static_dir: Path) -> None:
    """Register every route of the HTTP API on ``app``; ``static_dir`` holds the demo page
    (``GET /`` answers 404 JSON without its ``index.html``)."""
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
