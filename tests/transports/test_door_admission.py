"""One door admits the calls of every transport: a WebRTC offer, a WebSocket session and a SIP
INVITE are counted in ``vg_calls_total{result}`` the same way when answered and when refused for a
full pool (503 with ``Retry-After``: HTTP in the OpenAI error shape, SIP with the code in a
``Warning``), and all three are refused while the gateway drains. Real HTTP, WebSocket and SIP
over loopback on a real gateway; the WebRTC caller never connects (its call holds the unit)."""

from __future__ import annotations

import aiohttp

from gateway.server.app_keys import METRICS, SESSIONS, SHUTDOWN, SIP
from tests.helpers import app_idle, serve, wait_until
from tests.hostile.sdp_offers import offers
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket
from tests.transports.websocket.ws_client import EventClient

HANDSHAKE = {
    "Upgrade": "websocket",
    "Connection": "Upgrade",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
}


async def test_every_transport_is_admitted_counted_and_refused_by_the_one_door(models, gateway_config):
    config = sip_config(gateway_config, pool_size=1, retry_after_s=7)
    async with serve(config, models) as (url, app):
        registry = app[METRICS].registry

        def calls(result: str) -> float:
            return registry.get_sample_value("vg_calls_total", {"result": result}) or 0.0

        sip_port = app[SIP].port
        async with aiohttp.ClientSession() as http, SipSocket(sip_port) as phone:
            # SIP: a trusted phone's INVITE is answered (no webhook: accepted at once) and counted.
            phone.send(sip_samples.invite(sip_port, caller_port=phone.port, branch="z9hG4bKadmit1", call_id="a1"))
            await phone.response(200, within=15)
            assert calls("answered") == 1.0, "a SIP call answered is counted as every other"
            (sip_call,) = app[SESSIONS].sessions
            await app[SESSIONS].hangup(sip_call)
            assert await wait_until(lambda: app_idle(app), 10)

            # WebRTC: an offer answered holds the only unit.
            async with http.post(
                f"{url}/v1/realtime/calls", data=offers()["sip_bridge"], headers={"Content-Type": "application/sdp"}
            ) as response:
                assert response.status == 201, await response.text()
                location = response.headers["Location"]
            assert calls("answered") == 2.0

            # The pool is full: the WebSocket and the SIP INVITE are refused alike, and counted.
            async with http.get(f"{url}/v1/realtime", headers=HANDSHAKE) as response:
                assert response.status == 503 and response.headers["Retry-After"] == "7"
                assert (await response.json())["error"]["code"] == "pool_full"
            phone.send(sip_samples.invite(sip_port, caller_port=phone.port, branch="z9hG4bKadmit2", call_id="a2"))
            busy = await phone.response(503)
            assert busy.get("Retry-After") == "7" and "pool_full" in (busy.get("Warning") or "")
            assert calls("pool_full") == 2.0 and calls("answered") == 2.0

            async with http.delete(f"{url}{location}") as response:
                assert response.status == 200
            assert await wait_until(lambda: app_idle(app), 10)
            async with EventClient(url) as client:  # WebSocket: answered and counted
                await client.wait_for("session.created", timeout=10)
            assert calls("answered") == 3.0
            assert await wait_until(lambda: not app[SESSIONS].sessions and app_idle(app), 10)

            # Draining: every way in is refused with server_shutdown (not counted: try another instance).
            app[SHUTDOWN].begin()
            async with http.post(
                f"{url}/v1/realtime/calls", data=offers()["sip_bridge"], headers={"Content-Type": "application/sdp"}
            ) as response:
                assert response.status == 503 and response.headers["Retry-After"] == "7"
                assert (await response.json())["error"]["code"] == "server_shutdown"
            async with http.get(f"{url}/v1/realtime", headers=HANDSHAKE) as response:
                assert response.status == 503 and (await response.json())["error"]["code"] == "server_shutdown"
            phone.send(sip_samples.invite(sip_port, caller_port=phone.port, branch="z9hG4bKadmit3", call_id="a3"))
            closed = await phone.response(503)
            assert closed.get("Retry-After") == "7"
            assert (calls("answered"), calls("pool_full"), calls("server_shutdown")) == (3.0, 2.0, 0.0)
        assert not app[SESSIONS].sessions
