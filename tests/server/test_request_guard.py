"""Who may send a request (gateway/server/request_guard.py), over real HTTP and WebSocket on
loopback: a web page on an origin the gateway does not list can neither open a WebSocket session
nor a call with a form POST (CORS alone let both through), a request sent to a name that is no
loopback name reaches nothing on a loopback gateway (DNS rebinding), and an offer body a page
could send without a preflight gets 415. The gateway's own origin (the demo page, also behind a
proxy) and requests without ``Origin`` (SDKs, curl) pass."""

from __future__ import annotations

import json

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.config import GatewayConfig
from gateway.server.app import create_app
from gateway.server.app_keys import POOL, SESSIONS
from gateway.server.errors import ApiError
from gateway.server.request_guard import is_loopback_name, refuse_foreign_host, split_authority
from tests.helpers import serve, wait_until
from tests.hostile.sdp_offers import offers

APP = "https://app.example"
EVIL = "https://evil.example"


async def error_of(response: aiohttp.ClientResponse) -> dict:
    assert response.content_type == "application/json", await response.text()
    return (await response.json())["error"]


async def test_a_websocket_from_an_origin_not_listed_is_refused_before_a_session(models, gateway_config):
    async with serve(gateway_config(allowed_origins=APP), models) as (url, app):
        ws_url = url.replace("http://", "ws://") + "/v1/realtime"
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(ws_url, protocols=["realtime"], origin=EVIL)
            assert refused.value.status == 403
            assert not app[SESSIONS].sessions and app[POOL].units[0].sessions_served == 0
            # The sideband of a call is a WebSocket too: refused for its origin, before the call id is looked up.
            with pytest.raises(aiohttp.WSServerHandshakeError) as sideband:
                await http.ws_connect(f"{ws_url}?call_id=rtc_x_{'0' * 32}", origin="null")
            assert sideband.value.status == 403

            for origin in (APP, None):  # the listed origin, and a client that is no browser
                async with http.ws_connect(ws_url, protocols=["realtime"], origin=origin) as ws:
                    created = await ws.receive_json(timeout=20)
                    assert created["type"] == "session.created", created
                assert await wait_until(lambda: not app[SESSIONS].sessions, 10)
        assert app[POOL].units[0].sessions_served == 2


async def test_a_cross_site_form_post_opens_no_call(models, gateway_config):
    offer = offers()["sip_bridge"]
    async with serve(gateway_config(allowed_origins=APP), models) as (url, app):
        calls = f"{url}/v1/realtime/calls"
        async with aiohttp.ClientSession() as http:
            # What an <form method=post> on another site sends: no preflight, no CORS header needed.
            async with http.post(calls, data={"sdp": offer}, headers={"Origin": EVIL}) as response:
                assert response.status == 403, await response.text()
                assert (await error_of(response))["code"] == "origin_not_allowed"
                assert "Access-Control-Allow-Origin" not in response.headers
            # The bodies a page may send anywhere without a preflight are no offer, whatever the origin.
            for body, content_type in (
                (f"sdp={offer}", "application/x-www-form-urlencoded"),
                (offer, "text/plain"),
                (offer, None),
            ):
                headers = {"Content-Type": content_type} if content_type else {}
                skip = () if content_type else ("Content-Type",)
                async with http.post(calls, data=body.encode(), headers=headers, skip_auto_headers=skip) as response:
                    assert response.status == 415, (content_type, await response.text())
                    error = await error_of(response)
                    assert error["code"] == "unsupported_media_type" and "application/sdp" in error["message"]
            async with http.post(f"{url}/offer", data=json.dumps({"sdp": offer, "type": "offer"})) as response:
                assert response.status == 415, await response.text()  # text/plain: the demo page sends JSON
            assert not app[SESSIONS].sessions and app[POOL].units[0].sessions_served == 0

            # The listed origin's page calls, and the only unit is its.
            headers = {"Origin": APP, "Content-Type": "application/sdp"}
            async with http.post(calls, data=offer, headers=headers) as response:
                assert response.status == 201, await response.text()
                assert response.headers["Access-Control-Allow-Origin"] == APP
                location = response.headers["Location"]
            async with http.delete(f"{url}{location}", headers={"Origin": APP}) as response:
                assert response.status == 200, await response.text()


async def test_the_gateways_own_origin_passes_also_behind_a_proxy(models, gateway_config):
    """The demo page at ``/`` posts from the gateway's origin (no --allowed-origins); behind nginx
    the origin is the proxy's: its Host, and X-Forwarded-Proto when it terminates TLS."""
    bad_offer = json.dumps({"sdp": "v=0", "type": "offer"})  # past the guard: 400 from the offer check
    async with serve(gateway_config(allowed_hosts="gw.example"), models) as (url, _app):
        port = int(url.rsplit(":", 1)[1])
        async with aiohttp.ClientSession() as http:

            async def post(origin: str, **headers: str) -> tuple[int, str]:
                headers = {"Origin": origin, "Content-Type": "application/json", **headers}
                async with http.post(f"{url}/offer", data=bad_offer, headers=headers) as response:
                    return response.status, (await error_of(response))["code"]

            assert await post(url) == (400, "invalid_offer")
            assert await post(f"http://localhost:{port}") == (403, "origin_not_allowed")  # another origin
            assert await post(f"http://localhost:{port}", Host=f"localhost:{port}") == (400, "invalid_offer")
            assert await post("http://gw.example", Host="gw.example") == (400, "invalid_offer")
            assert await post("http://gw.example:8080", Host="gw.example:8080") == (400, "invalid_offer")
            assert await post("http://gw.example:8080", Host="gw.example") == (403, "origin_not_allowed")
            tls = {"Host": "gw.example", "X-Forwarded-Proto": "https"}
            assert await post("https://gw.example", **tls) == (400, "invalid_offer")
            assert await post("https://gw.example", Host="gw.example") == (403, "origin_not_allowed")
            assert await post("http://gw.example", **tls) == (403, "origin_not_allowed")
            assert await post(EVIL, **tls) == (403, "origin_not_allowed")


async def test_a_loopback_gateway_answers_only_loopback_names_and_its_allowed_hosts(models, gateway_config):
    async with serve(gateway_config(allowed_hosts="gw.example, 10.0.0.5:8080"), models) as (url, _app):
        port = int(url.rsplit(":", 1)[1])
        async with aiohttp.ClientSession() as http:

            async def status(host: str, path: str = "/v1/pool") -> int:
                async with http.get(f"{url}{path}", headers={"Host": host}) as response:
                    if response.status != 200:
                        assert (await error_of(response))["code"] == "host_not_allowed"
                    return response.status

            for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST.", f"[::1]:{port}", "127.0.0.2"):
                assert await status(host) == 200, host
            for host in ("gw.example", f"GW.example:{port}", "10.0.0.5:9000"):  # a port in the list is ignored
                assert await status(host) == 200, host
            for host in (f"rebound.example:{port}", "localhost.rebound.example", "10.0.0.6", "[::1"):
                assert await status(host) == 403, host
            assert await status(f"rebound.example:{port}", "/healthz") == 200  # probes name an address
            assert await status(f"rebound.example:{port}", "/") == 403  # the demo page too
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(
                    url.replace("http://", "ws://") + "/v1/realtime", headers={"Host": "rebound.example"}
                )
            assert refused.value.status == 403


def test_a_gateway_off_loopback_checks_no_host_unless_told(models):
    """Bound to every address with no --allowed-hosts, any Host is answered (there is no one list
    of the names a LAN or a proxy uses); with --allowed-hosts the list applies, loopback names
    included (a container's health check). The guard itself, on the app's config (no socket on
    every address in a test)."""

    def refused(app: web.Application, host: str) -> bool:
        try:
            refuse_foreign_host(make_mocked_request("GET", "/v1/pool", headers={"Host": host}, app=app))
        except ApiError as error:
            assert error.status == 403 and error.code == "host_not_allowed"
            return True
        return False

    everywhere = create_app(GatewayConfig(host="0.0.0.0"), models=models)
    assert not refused(everywhere, "gw.example") and not refused(everywhere, "10.0.0.6:8080")
    listed = create_app(GatewayConfig(host="0.0.0.0", allowed_hosts="gw.example"), models=models)
    assert [refused(listed, host) for host in ("gw.example", "other.example", "127.0.0.1:8080")] == [
        False,
        True,
        False,
    ]
    anything = create_app(GatewayConfig(allowed_hosts="*"), models=models)
    assert not refused(anything, "rebound.example")


def test_host_names_and_authorities():
    assert [is_loopback_name(n) for n in ("localhost", "127.8.9.1", "::1", "[::1]", "localhost.")] == [True] * 5
    assert not any(is_loopback_name(n) for n in ("", "0.0.0.0", "::", "10.0.0.1", "localhost.example", "[::1]:80"))
    assert split_authority("[::1]:8080") == ("::1", 8080)
    assert split_authority("GW.Example.:443") == ("gw.example", 443)
    assert split_authority("::1") == ("::1", None)
    for bad in ("[::1", "[::1]x", "host:port", "host:\u0663"):
        with pytest.raises(ValueError):
            split_authority(bad)
