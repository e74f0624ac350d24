"""Every route of the app wants the API key, or is on the written list of open routes below: the
test walks ``app.router`` (not a hand-written list of paths), so a route added without
``require_api_key`` fails it. Real HTTP over loopback, with ``--api-key`` and
``--protect-observability``; each route is asked without a key, GET routes with a WebSocket
handshake (``GET /v1/realtime`` checks the key only on an upgrade)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from gateway.server.app import create_app
from gateway.server.app_keys import CONFIG

API_KEY = "sk-test-every-route"
# (method, route as the router names it): why it answers without the API key.
OPEN_ROUTES = {
    ("GET", "/"): "the demo page",
    ("HEAD", "/"): "the demo page",
    ("GET", "/static"): "the demo page's files",
    ("HEAD", "/static"): "the demo page's files",
    ("GET", "/healthz"): "load balancers and probes carry no key",
    ("HEAD", "/healthz"): "load balancers and probes carry no key",
}
HANDSHAKE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


@contextlib.asynccontextmanager
async def running(app: web.Application, port: int) -> AsyncIterator[str]:
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def sample_path(route: web.AbstractRoute) -> str:
    """A path the route answers: its placeholders filled with a call id that is not there, a
    static folder with a file name."""
    canonical = route.resource.canonical if route.resource is not None else ""
    if isinstance(route.resource, web.StaticResource):
        return f"{canonical}/index.html"
    return re.sub(r"\{[^}]+\}", "rtc_nosuchcall_" + "0" * 32, canonical)


async def routes_open_without_the_key(url: str, app: web.Application) -> dict[tuple[str, str], int]:
    """Each route of ``app.router`` that did not answer 401 (``invalid_api_key``; a HEAD answer
    has no body) when asked without a key: (method, canonical route) -> the status it gave."""
    found = {}
    async with aiohttp.ClientSession() as http:
        for route in app.router.routes():
            assert route.resource is not None
            bodyless = route.method in ("GET", "HEAD")
            headers = HANDSHAKE if bodyless else {"Content-Type": "application/sdp"}
            data = None if bodyless else b"v=0\r\n"
            async with http.request(route.method, f"{url}{sample_path(route)}", headers=headers, data=data) as answer:
                body = await answer.read()
            if answer.status == 401 and (route.method == "HEAD" or b'"invalid_api_key"' in body):
                continue
            found[(route.method, route.resource.canonical)] = answer.status
    return found


async def test_every_route_wants_the_api_key_or_is_listed_open(models, gateway_config):
    app = create_app(gateway_config(api_key=API_KEY, protect_observability=True), models=models)
    methods = {route.method for route in app.router.routes()}
    assert len(app.router.routes()) >= 20 and {"GET", "HEAD", "POST", "DELETE"} <= methods
    async with running(app, app[CONFIG].port) as url:
        opened = await routes_open_without_the_key(url, app)
    assert set(opened) == set(OPEN_ROUTES), opened
    assert all(status < 500 for status in opened.values()), opened


async def test_the_walk_catches_a_route_added_without_the_key(models, gateway_config):
    app = create_app(gateway_config(api_key=API_KEY, protect_observability=True), models=models)

    async def unguarded(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app.router.add_post("/v1/realtime/unguarded", unguarded)
    async with running(app, app[CONFIG].port) as url:
        opened = await routes_open_without_the_key(url, app)
    assert opened.get(("POST", "/v1/realtime/unguarded")) == 200, opened
