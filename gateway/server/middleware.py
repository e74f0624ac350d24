"""The app's middlewares: CORS (outermost) and the error middleware, the one place where errors
become responses.

Every error answer is JSON in the OpenAI shape ``{"error": {"type", "code", "message", "param"}}``:
an :class:`ApiError` raised by a handler, aiohttp's own HTTP errors (404 unknown route, 405 with
its ``Allow`` header, 413 body too large), a Realtime protocol error in a session config of the
request (a ``ClientError``: 400 with its code and param, :meth:`ApiError.from_protocol`) and any
unexpected exception (500, logged; the server goes on). CORS follows the Fetch standard (preflight ``OPTIONS`` with
``Access-Control-Request-Method``) for the origins of ``allowed_origins``; which requests a page may
send at all is :mod:`gateway.server.request_guard` (inside the error middleware).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Optional

from aiohttp import web

from gateway.realtime.items import ClientError
from gateway.server.app_keys import CONFIG
from gateway.server.errors import ApiError
from gateway.server.request_guard import origin_listed

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_HTTP_ERROR_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}

# What OpenAI Realtime clients send (Agents SDK, openai-js in a browser): allowed when a preflight
# names no headers.
CLIENT_HEADERS = "Authorization, Content-Type, OpenAI-Beta, OpenAI-Organization, OpenAI-Project, X-OpenAI-Agents-SDK"


def render_error(error: ApiError) -> web.Response:
    """The JSON response of ``error``: its status, body and headers."""
    return web.json_response(error.body, status=error.status, headers=error.headers)


def http_error(request: web.Request, exc: web.HTTPException) -> ApiError:
    """aiohttp's own error (404, 405, 413, ...; ``exc.status`` >= 400) as an ApiError, keeping its
    headers (``Allow`` of a 405) but not its text body's content headers; a folder under
    ``/static/`` (aiohttp's 403: no listing) is a 404 ``not_found``."""
    if exc.status == 413:
        limit = request.app[CONFIG].max_offer_bytes
        message = f"Request body too large (at most {limit} bytes, max_offer_bytes)."
    elif exc.status == 403 and isinstance(request.match_info.route.resource, web.StaticResource):
        # aiohttp refuses a folder of the demo page (no listing) with 403: there is no file there
        return ApiError(404, f"Not found: {request.path} is no file of the demo page.", "not_found")
    else:
        message = exc.text or exc.reason
    headers = {
        name: value for name, value in exc.headers.items() if name.lower() not in ("content-type", "content-length")
    }
    return ApiError(exc.status, message, _HTTP_ERROR_CODES.get(exc.status, "http_error"), headers=headers)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render every error of ``handler`` as JSON (see the module docstring). aiohttp's
    HTTPExceptions below 400 (redirects) pass as they are."""
    try:
        return await handler(request)
    except ApiError as error:
        return render_error(error)
    except ClientError as error:  # a session config of the request: a Realtime protocol error
        return render_error(ApiError.from_protocol(error))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return render_error(http_error(request, exc))
    except Exception:  # a bug: the client still gets the error shape it parses, the server goes on
        log.exception("%s %s failed", request.method, request.path)
        return render_error(ApiError(500, "The server failed to handle the request.", "server_error", "server_error"))


@web.middleware
async def cors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """CORS for the origins in ``allowed_origins`` (``*`` allowed): a preflight is answered here
    (204), and every answer to an allowed origin, errors included, carries
    ``Access-Control-Allow-Origin`` and exposes ``Location`` (the call id) and ``Retry-After``."""
    allowed = _allowed_origin(request.app[CONFIG].origins, request.headers.get("Origin"))
    response: web.StreamResponse
    if request.method == "OPTIONS" and allowed is not None and request.headers.get("Access-Control-Request-Method"):
        response = web.Response(status=204)
        response.headers["Access-Control-Allow-Methods"] = "GET, POST, DELETE, OPTIONS"
        # What the browser asks for is allowed (the origin is what CORS trusts).
        response.headers["Access-Control-Allow-Headers"] = request.headers.get(
            "Access-Control-Request-Headers", CLIENT_HEADERS
        )
        response.headers["Access-Control-Max-Age"] = "600"
    else:
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # what the error middleware lets pass (redirects)
            if allowed is not None:
                _add_cors_headers(exc.headers, allowed)
            raise
    if allowed is not None:
        _add_cors_headers(response.headers, allowed)
    return response


def _allowed_origin(origins: list[str], origin: Optional[str]) -> Optional[str]:
    """The ``Access-Control-Allow-Origin`` value for a request from ``origin``: ``*`` when any
    origin is allowed, the origin itself when listed, None when it may not read the answer."""
    if not origin or not origin_listed(origins, origin):
        return None
    return "*" if "*" in origins else origin


def _add_cors_headers(headers: MutableMapping[str, str], allowed: str) -> None:
    """The CORS headers of an answer to an allowed origin (``allowed``: ``*`` or the origin)."""
    headers["Access-Control-Allow-Origin"] = allowed
    headers["Access-Control-Expose-Headers"] = "Location, Retry-After"
    if allowed != "*":
        headers["Vary"] = "Origin"
