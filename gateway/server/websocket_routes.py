"""``GET /v1/realtime``: the Realtime WebSocket transport (a session of its own), and sideband
control of a WebRTC call (``?call_id=rtc_...``). HTTP only here: who may connect, the upgrade, and
the refusals made before it; the sessions themselves are ``gateway.transports`` (the door and its
WebSocket leg).

Source: the OpenAI Realtime WebSocket contract: ``wss://host/v1/realtime?model=...`` with
``Authorization: Bearer <key>`` (server clients) or, from a browser, which cannot set headers, the
subprotocols ``realtime``, ``openai-insecure-api-key.<key>`` and optionally
``openai-beta.realtime-v1``; the server selects ``realtime``. ``OpenAI-Beta: realtime=v1`` (or that
subprotocol) asks for the beta protocol. A refusal is an HTTP error before the upgrade, JSON like
every error of the API: 400 (no WebSocket upgrade), 401, 403 (a browser page's origin or a Host the
gateway does not serve: :mod:`gateway.server.request_guard`, before this handler), 404 (no such
call), 429 ``too_many_sessions`` (the client's address holds ``max_sessions_per_source`` sessions;
for a sideband, ``too_many_sidebands``: the call has ``max_sidebands_per_call`` attached),
503 ``pool_full`` or ``compute_busy`` with ``Retry-After`` (after the key; a unit is claimed
before the upgrade), 503 ``server_shutdown`` while draining.
"""

from __future__ import annotations

from typing import Optional

from aiohttp import web

from gateway.pool.end_reason import EndReason
from gateway.realtime.session_update import SessionUpdate, merged_updates
from gateway.server.admission import admit, refused_error
from gateway.server.app_keys import CONFIG, LIMITS, SESSIONS, SIP
from gateway.server.auth import bearer, require_api_key
from gateway.server.errors import ApiError
from gateway.server.offers import requested_extensions
from gateway.transports.door import Refused
from gateway.transports.transport import TransportKind
from gateway.transports.websocket.event_socket import websocket_response
from gateway.transports.websocket.session import open_websocket_session
from gateway.transports.websocket.sideband import serve_sideband

API_KEY_PROTOCOL = "openai-insecure-api-key."  # + the key: the browser form of the bearer token
BETA_PROTOCOL = "openai-beta.realtime-v1"


def client_gone() -> web.Response:
    """What a handler returns for a client that went away before its answer was written: aiohttp
    fails to write it too and drops the connection without a log line (nginx's 499, "client closed
    request", in the access log). Raising the write error instead logged it as a server fault."""
    return web.Response(status=499, reason="Client Closed Request")


def offered_protocols(request: web.Request) -> list[str]:
    """The subprotocols of ``Sec-WebSocket-Protocol``, in the client's order."""
    header = request.headers.get("Sec-WebSocket-Protocol", "")
    return [name.strip() for name in header.split(",") if name.strip()]


def client_token(request: web.Request, offered: list[str]) -> Optional[str]:
    """The client's key: ``Authorization: Bearer``, else the ``openai-insecure-api-key.`` subprotocol."""
    token = bearer(request.headers.get("Authorization"))
    if token is not None:
        return token
    return next((name[len(API_KEY_PROTOCOL) :] or None for name in offered if name.startswith(API_KEY_PROTOCOL)), None)


def url_session_update(request: web.Request) -> Optional[SessionUpdate]:
    """What the URL asks of the session: ``model`` (kept like a ``session.model``) and
    ``intent=transcription`` (OpenAI's transcription session, as a ``session.update`` with ``type``
    ``transcription``: the caller is transcribed, never answered); None when it asks nothing. Another
    ``intent`` is ignored, as before. Raises ClientError (a 400) for a model name over the limits."""
    session: dict[str, str] = {}
    if request.query.get("model"):
        session["model"] = request.query["model"]
    if request.query.get("intent") == "transcription":
        session["type"] = "transcription"
    return SessionUpdate.parse(session, request.app[LIMITS]) if session else None


def wants_beta(request: web.Request, offered: list[str]) -> bool:
    """The client asked for the beta protocol (``OpenAI-Beta: realtime=v1``, or its subprotocol)."""
    return BETA_PROTOCOL in offered or "realtime=v1" in request.headers.get("OpenAI-Beta", "").replace(" ", "")


async def realtime_websocket(request: web.Request) -> web.StreamResponse:
    """``GET /v1/realtime[?model=...][&intent=transcription]``: a Realtime session over this
    WebSocket, or with ``?call_id=`` a sideband on that WebRTC call (:func:`sideband`). ``model`` is
    kept like a ``session.model`` (any name; the local models answer); ``intent=transcription`` opens
    a transcription session (:func:`url_session_update`). Raises ApiError before the upgrade
    (see the module docstring); the ephemeral key is given back whenever no session came of it."""
    offered = offered_protocols(request)
    ws = websocket_response(offered)
    if not ws.can_prepare(request).ok:
        raise ApiError(
            400,
            "GET /v1/realtime is a WebSocket endpoint: connect with a WebSocket client (Upgrade: websocket).",
            "websocket_required",
        )
    token = client_token(request, offered)
    if "call_id" in request.query:
        return await sideband(request, ws, request.query["call_id"], token)
    admission = admit(request, token)
    try:
        extensions = requested_extensions(request)
        url_update = url_session_update(request)
        update = merged_updates(admission.update, url_update)
        beta = wants_beta(request, offered)
        session, leg = open_websocket_session(
            request.app[SESSIONS], update, beta=beta, extensions=extensions, source=admission.source
        )
    except Refused as refused:
        admission.refund(request)
        raise refused_error(refused) from None
    except BaseException:  # a server fault: no session, so no key used up
        admission.refund(request)
        raise
    try:
        await ws.prepare(request)
    except ConnectionError:  # the client went away during the upgrade: no fault, nothing to answer
        await session.hangup(EndReason.WEBSOCKET_CLOSED)
        return client_gone()
    except BaseException:
        await session.hangup(EndReason.WEBSOCKET_CLOSED)
        raise
    await leg.serve(ws)
    return ws


async def sideband(
    request: web.Request, ws: web.WebSocketResponse, call_id: str, token: Optional[str]
) -> web.StreamResponse:
    """``GET /v1/realtime?call_id=rtc_...``: attach ``ws`` to the live WebRTC call ``call_id``
    (``gateway.transports.sideband``; the gateway's own events only those its ``gateway_events``
    asks for). Needs the API key when one is configured; without one, the call id is the
    capability (as for hang-up). A SIP call is steered once accepted: OpenAI's SIP guide has the
    webhook accept the call with the session's configuration, then the backend open the call's
    WebSocket (``wss://.../v1/realtime?call_id=``); while it rings there is no session yet. Raises
    ApiError 401, 404 ``call_not_found``, 409 ``call_state`` (a SIP call still ringing), 400 for an unknown
    ``gateway_events`` name, 429 ``too_many_sidebands`` when the call has ``max_sidebands_per_call``
    attached (each has its own event rate; behind a proxy the per-source cap does not count them)."""
    config = request.app[CONFIG]
    require_api_key(config.api_key, token, "A sideband connection")
    extensions = requested_extensions(request)
    door = request.app[SESSIONS]
    call = door.live(call_id)
    if call is None or call.kind is TransportKind.WEBSOCKET:  # a sideband steers a call with its media elsewhere
        raise ApiError(404, f"no call {call_id}", "call_not_found", param="call_id")
    if call.kind is TransportKind.SIP and SIP in request.app and request.app[SIP].ringing(call_id):
        raise ApiError(
            409,
            f"Call {call_id} is ringing: accept it (POST /v1/realtime/calls/{call_id}/accept) before attaching "
            "a sideband; its session starts with the accept.",
            "call_state",
            param="call_id",
        )
    limit = config.max_sidebands_per_call
    if limit and call.sidebands >= limit:
        raise ApiError(
            429,
            f"Call {call_id} already has {call.sidebands} sideband connections, the most one call may have "
            f"(max_sidebands_per_call {limit}); close one first.",
            "too_many_sidebands",
            error_type="rate_limit_error",
            param="call_id",
        )
    call.sidebands += 1  # counted from here, before the upgrade awaits: no two requests pass on one place
    try:
        try:
            await ws.prepare(request)
        except ConnectionError:  # the client went away during the upgrade
            return client_gone()
        await serve_sideband(door, call, ws, extensions)
        return ws
    finally:
        call.sidebands -= 1


async def _close_websockets(app: web.Application) -> None:
    """``on_shutdown``: end the sessions and sidebands, so the WebSocket handlers return (before
    aiohttp waits for the handlers, which a WebSocket would hold)."""
    if SESSIONS in app:
        await app[SESSIONS].close_all()


def add_websocket_routes(app: web.Application) -> None:
    """Register ``GET /v1/realtime`` on ``app`` and the shutdown hook of its sockets."""
    app.router.add_get("/v1/realtime", realtime_websocket)
    app.on_shutdown.append(_close_websockets)
