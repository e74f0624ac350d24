"""SIP call control over HTTP, as OpenAI's SIP interface has it: ``POST
/v1/realtime/calls/{call_id}/accept`` (a session object: the call is answered with it),
``/reject`` (``{"status_code": 486}``, default 603), ``/refer`` (``{"target_uri": "sip:...|tel:..."}``);
hang-up is the shared ``/hangup`` route. HTTP only here; the SIP side is ``gateway.transports.sip``.

Who may: the API key when one is configured (the backend holds it; as for a sideband). Errors:
401, 404 ``call_not_found`` (never was, or the caller hung up), 409 ``call_state`` (accepted twice,
referred while ringing), 400 for a bad body, 502 ``refer_failed`` when the caller refuses the REFER.
A 409 or 502 says ``x-should-retry: false`` (``errors.NO_RETRY``): sent again, the request cannot
succeed, and a REFER sent again asks the caller's phone again, so the OpenAI SDK must not retry them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.server.app_keys import CONFIG, METRICS, SESSIONS, SHUTDOWN, SIP, SIP_SETTINGS
from gateway.server.auth import bearer, require_api_key
from gateway.server.errors import NO_RETRY, ApiError
from gateway.server.offers import parse_json, read_text, session_update
from gateway.transports.sip.call import CallStateError
from gateway.transports.sip.user_agent import CallNotFound, SipUserAgent


def _user_agent(request: web.Request) -> SipUserAgent:
    token = bearer(request.headers.get("Authorization"))
    require_api_key(request.app[CONFIG].api_key, token, "SIP call control")
    if SIP not in request.app:
        raise ApiError(404, "SIP is not enabled on this gateway (--sip-port)", "call_not_found")
    return request.app[SIP]


async def _json_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    text = await read_text(request)
    if not text.strip():
        return {}
    try:
        body = parse_json(text)
    except ValueError:
        raise ApiError(400, "body must be JSON", "invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object", "invalid_type")
    return body


def _not_found(call_id: str) -> ApiError:
    return ApiError(404, f"no call {call_id}", "call_not_found", param="call_id")


def _wrong_state(exc: CallStateError) -> ApiError:
    return ApiError(409, str(exc), "call_state", headers=NO_RETRY)


def _refer_failed(message: str) -> ApiError:
    return ApiError(502, message, "refer_failed", headers=NO_RETRY)


async def accept(request: web.Request) -> web.Response:
    """``POST .../accept`` with a session object (``{"type": "realtime", "instructions", ...}``):
    200 OK to the INVITE, the session starts with it. 200 ``{"call_id", "status": "accepted"}``."""
    user_agent = _user_agent(request)
    call_id = request.match_info["call_id"]
    body = await _json_body(request)
    update = session_update(request, body or None)  # raises ClientError: 400
    try:
        user_agent.accept(call_id, update)
    except CallNotFound:
        raise _not_found(call_id) from None
    except CallStateError as exc:
        raise _wrong_state(exc) from None
    return web.json_response({"call_id": call_id, "status": "accepted"})


async def reject(request: web.Request) -> web.Response:
    """``POST .../reject`` ``{"status_code": 400..699}`` (default 603 Decline)."""
    user_agent = _user_agent(request)
    call_id = request.match_info["call_id"]
    status = (await _json_body(request)).get("status_code", 603)
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 699:
        raise ApiError(400, "'status_code' must be an integer 400..699", "invalid_value", param="status_code")
    try:
        await user_agent.reject(call_id, status)
    except CallNotFound:
        raise _not_found(call_id) from None
    except CallStateError as exc:
        raise _wrong_state(exc) from None
    return web.json_response({"call_id": call_id, "status": "rejected", "status_code": status})


async def refer(request: web.Request) -> web.Response:
    """``POST .../refer`` ``{"target_uri": "sip:..." | "tel:..."}``: an in-dialog REFER; 200 once
    the caller took it (202), the call then ends when the transfer reports success."""
    user_agent = _user_agent(request)
    call_id = request.match_info["call_id"]
    target = (await _json_body(request)).get("target_uri")
    if not isinstance(target, str) or not target.startswith(("sip:", "sips:", "tel:")) or len(target) > 1024:
        raise ApiError(400, "'target_uri' must be a sip:, sips: or tel: URI", "invalid_value", param="target_uri")
    if any(char in target for char in '<>\r\n "'):
        raise ApiError(400, "'target_uri' holds characters a URI cannot", "invalid_value", param="target_uri")
    try:
        response = await user_agent.refer(call_id, target)
    except CallNotFound:
        raise _not_found(call_id) from None
    except CallStateError as exc:
        raise _wrong_state(exc) from None
    except (TimeoutError, OSError):
        raise _refer_failed("the caller did not answer the REFER") from None
    if not 200 <= response.status < 300:
        raise _refer_failed(f"the caller refused the REFER: {response.status} {response.reason}")
    return web.json_response({"call_id": call_id, "status": "referred", "sip_status": response.status})


async def sip_user_agent(app: web.Application) -> AsyncIterator[None]:
    """The cleanup context of the SIP user agent, when ``sip_port`` is set (after the door: its
    calls are the door's sessions, in the graceful shutdown and the metrics as transport ``sip``)."""
    config = app[CONFIG]
    if not config.sip_port:
        yield
        return
    # the door refuses while draining, and counts; the settings were read when the app was built
    user_agent = SipUserAgent(config, app[SESSIONS], settings=app[SIP_SETTINGS])
    srtp_dropped = app[METRICS].srtp_dropped
    user_agent.on_srtp_dropped = lambda reason: srtp_dropped.labels(reason=reason).inc()
    await user_agent.start()
    app[SHUTDOWN].add_goodbyes(lambda: user_agent.byes_in_flight)  # a BYE of the drain waits for its answer
    app[SIP] = user_agent
    yield
    await user_agent.close()


def add_sip_routes(app: web.Application) -> None:
    """Register the SIP control routes (the app's ``cleanup_ctx`` must hold :func:`sip_user_agent`)."""
    app.router.add_post("/v1/realtime/calls/{call_id}/accept", accept)
    app.router.add_post("/v1/realtime/calls/{call_id}/reject", reject)
    app.router.add_post("/v1/realtime/calls/{call_id}/refer", refer)
