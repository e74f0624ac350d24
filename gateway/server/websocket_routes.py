"""``GET /v1/realtime``: the Realtime WebSocket transport (a session of its own), and sideband
control of a WebRTC call (``?call_id=rtc_...``). HTTP only here: who may connect, the upgrade, and
the refusals made before it; the sessions themselves are ``gateway.transports``.

Source: the OpenAI Realtime WebSocket contract: ``wss://host/v1/realtime?model=...`` with
``Authorization: Bearer <key>`` (server clients) or, from a browser, which cannot set headers, the
subprotocols ``realtime``, ``openai-insecure-api-key.<key>`` and optionally
``openai-beta.realtime-v1``; the server selects ``realtime``. ``OpenAI-Beta: realtime=v1`` (or that
subprotocol) asks for the beta protocol. A refusal is an HTTP error before the upgrade, JSON like
every error of the API: 400 (no WebSocket upgrade), 401, 404 (no such call), 503 ``pool_full`` with
``Retry-After`` (a unit is claimed before the upgrade), 503 ``server_shutdown`` while draining.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Optional

from aiohttp import web

from gateway.pool.end_reason import EndReason
from gateway.pool.pool import PoolFullError
from gateway.server.admission import admit, merged_session_config, pool_full_error
from gateway.server.app_keys import CALLS, CONFIG, METRICS, POOL, SESSIONS, SHUTDOWN, local_model_names
from gateway.server.auth import bearer, same_key
from gateway.server.errors import ApiError
from gateway.transports.event_socket import websocket_response
from gateway.transports.registry import SessionRegistry
from gateway.transports.websocket_session import WebSocketSession

API_KEY_PROTOCOL = "openai-insecure-api-key."  # + the key: the browser form of the bearer token
BETA_PROTOCOL = "openai-beta.realtime-v1"


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


def wants_beta(request: web.Request, offered: list[str]) -> bool:
    """The client asked for the beta protocol (``OpenAI-Beta: realtime=v1``, or its subprotocol)."""
    return BETA_PROTOCOL in offered or "realtime=v1" in request.headers.get("OpenAI-Beta", "").replace(" ", "")


async def realtime_websocket(request: web.Request) -> web.StreamResponse:
    """``GET /v1/realtime[?model=...]``: a Realtime session over this WebSocket, or with
    ``?call_id=`` a sideband on that WebRTC call (:func:`sideband`). ``model`` is kept like a
    ``session.model`` (any name; the local models answer). Raises ApiError before the upgrade
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
        model = request.query.get("model")
        session_config = merged_session_config(admission.session_config, {"model": model} if model else None)
        session = request.app[SESSIONS].open(session_config, beta=wants_beta(request, offered))
    except PoolFullError as exc:
        admission.refund(request)
        raise pool_full_error(request, exc) from None
    except BaseException:  # a server fault: no session, so no key used up
        admission.refund(request)
        raise
    request.app[METRICS].calls.labels(result="answered").inc()
    try:
        await ws.prepare(request)
    except BaseException:  # the client went away during the upgrade
        await session.hangup(EndReason.WEBSOCKET_CLOSED)
        raise
    await session.serve(ws)
    return ws


async def sideband(
    request: web.Request, ws: web.WebSocketResponse, call_id: str, token: Optional[str]
) -> web.StreamResponse:
    """``GET /v1/realtime?call_id=rtc_...``: attach ``ws`` to the live WebRTC call ``call_id``
    (``gateway.transports.sideband``). Needs the API key when one is configured; without one, the
    call id is the capability (as for hang-up). Raises ApiError 401, 404 ``call_not_found``."""
    config = request.app[CONFIG]
    if config.api_key and not same_key(token, config.api_key):
        raise ApiError(
            401,
            "A sideband connection needs the API key: send 'Authorization: Bearer <API key>'.",
            "invalid_api_key",
            "authentication_error",
        )
    call = request.app[CALLS].calls.get(call_id)
    if call is None or call.end_reason is not None:
        raise ApiError(404, f"no call {call_id}", "call_not_found", param="call_id")
    await ws.prepare(request)
    await request.app[SESSIONS].serve_sideband(call, ws)
    return ws


async def websocket_sessions(app: web.Application) -> AsyncIterator[None]:
    """The cleanup context of the WebSocket session registry (after the models and pool): its
    sessions join the graceful shutdown's calls and the metrics (transport ``websocket``); every
    session and sideband still open when the app shuts down is ended then (``on_shutdown``: before
    aiohttp waits for the handlers, which a WebSocket would hold)."""
    config, metrics = app[CONFIG], app[METRICS]
    sessions = SessionRegistry(app[POOL], config, local_model_names(app))

    def on_session_end(session: WebSocketSession) -> None:
        metrics.call_ended("websocket", session.end_reason or "unknown")

    sessions.on_event = metrics.observe_pipeline_event
    sessions.on_server_event = metrics.observe_server_event
    sessions.on_session_start = lambda session: metrics.call_started("websocket")
    sessions.on_session_end = on_session_end
    app[SHUTDOWN].add_calls(lambda: list(sessions.sessions.values()))
    app[SESSIONS] = sessions
    yield
    await sessions.close_all()


async def _close_websockets(app: web.Application) -> None:
    """``on_shutdown``: end the WebSocket sessions and sidebands, so their handlers return."""
    if SESSIONS in app:
        await app[SESSIONS].close_all()


def add_websocket_routes(app: web.Application) -> None:
    """Register ``GET /v1/realtime`` on ``app`` and the shutdown hook of its sockets (the app's
    ``cleanup_ctx`` must also hold :func:`websocket_sessions`)."""
    app.router.add_get("/v1/realtime", realtime_websocket)
    app.on_shutdown.append(_close_websockets)
