"""The refusals of the key check, over real HTTP on loopback: a key that is not UTF-8 is a 401
like any wrong key (it was a 500 and a logged traceback), and a caller without the key hears 401
even while the gateway is full: it learns nothing of the load and is not counted as a refused
call (the busy check ran first)."""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp

from gateway.server.app_keys import METRICS, SESSIONS
from tests.helpers import serve
from tests.hostile.sdp_offers import offers

API_KEY = "sk-test-refusals"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


async def raw_request(url: str, head: bytes) -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, raw bytes) to the gateway at ``url``; returns the
    status and body of its answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head + b"Connection: close\r\nContent-Length: 0\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(), 20)
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


async def test_a_key_that_is_not_utf8_is_refused_with_401_and_no_traceback(models, gateway_config, caplog):
    async with serve(gateway_config(api_key=API_KEY), models) as (url, app):
        host = url.removeprefix("http://").encode()
        upgrade = (
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        )
        with caplog.at_level(logging.INFO):
            for head in (
                b"POST /v1/realtime/client_secrets HTTP/1.1\r\nAuthorization: Bearer \xff\r\n",
                b"POST /v1/realtime/calls HTTP/1.1\r\nContent-Type: application/sdp\r\n"
                b"Authorization: Bearer sk-\xfe\xff\r\n",
                b"GET /v1/realtime HTTP/1.1\r\n"
                + upgrade
                + b"Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.\xff\r\n",
                b"DELETE /v1/realtime/calls/rtc_x_0 HTTP/1.1\r\nAuthorization: Bearer \xc3\x28\r\n",
            ):
                status, body = await raw_request(url, head.replace(b"\r\n", b"\r\nHost: " + host + b"\r\n", 1))
                assert status == 401, (head, body)
                assert json.loads(body)["error"]["code"] == "invalid_api_key"
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]
        assert not app[SESSIONS].sessions


async def test_without_the_key_a_full_gateway_says_401_and_counts_nothing(models, gateway_config):
    async with serve(gateway_config(api_key=API_KEY, pool_size=1), models) as (url, app):
        registry = app[METRICS].registry

        def refused(code: str) -> float:
            return registry.get_sample_value("vg_calls_total", {"result": code}) or 0.0

        calls = f"{url}/v1/realtime/calls"
        offer = offers()["sip_bridge"]
        async with aiohttp.ClientSession() as http:
            async with http.post(calls, data=offer, headers={"Content-Type": "application/sdp", **AUTH}) as response:
                assert response.status == 201, await response.text()
                location = response.headers["Location"]
            # The only unit is taken.
            for token in (None, "sk-wrong", "ek_made_up"):
                headers = {"Content-Type": "application/sdp"}
                if token:
                    headers["Authorization"] = f"Bearer {token}"
                async with http.post(calls, data=offer, headers=headers) as response:
                    assert response.status == 401, (token, await response.text())
                    assert "Retry-After" not in response.headers
            ws_url = url.replace("http://", "ws://") + "/v1/realtime"
            try:
                await http.ws_connect(ws_url, protocols=["realtime", "openai-insecure-api-key.sk-wrong"])
            except aiohttp.WSServerHandshakeError as refusal:
                assert refusal.status == 401
            else:
                raise AssertionError("a WebSocket with a wrong key was upgraded")
            assert refused("pool_full") == 0.0 and refused("compute_busy") == 0.0

            # With the key the caller is told the gateway is full, and that refusal is counted.
            async with http.post(calls, data=offer, headers={"Content-Type": "application/sdp", **AUTH}) as response:
                assert response.status == 503, await response.text()
                assert (await response.json())["error"]["code"] in ("pool_full", "compute_busy")
            assert refused("pool_full") + refused("compute_busy") == 1.0
            async with http.delete(f"{url}{location}", headers=AUTH) as response:
                assert response.status == 200
