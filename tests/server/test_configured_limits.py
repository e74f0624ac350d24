"""The operator's limits are the edge's limits: a session config sent with an offer or a
client_secrets request is checked once, at the edge, against the configured
``SessionLimits`` (``--max-instructions-chars``...), and refused with a 400 naming the configured
value; no unit is claimed for it."""

from __future__ import annotations

import json

import aiohttp
from aiortc import RTCPeerConnection

from gateway.server.app_keys import POOL
from tests.helpers import app_idle, serve

LIMIT = 1000


async def offer_sdp() -> str:
    pc = RTCPeerConnection()
    pc.addTransceiver("audio", direction="sendrecv")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


def multipart(sdp: str, session: dict) -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("sdp", sdp, content_type="application/sdp")
    form.add_field("session", json.dumps(session), content_type="application/json")
    return form


def assert_names_configured_limit(status: int, body: dict) -> None:
    assert status == 400, body
    error = body["error"]
    assert error["code"] == "string_above_max_length" and error["param"] == "session.instructions", error
    assert f"maximum length {LIMIT}," in error["message"] and "16000" not in error["message"], error


async def test_offer_session_over_the_configured_limit_is_a_400_naming_it(models, gateway_config):
    """Under the default 16 000 but over the configured 1 000 (was a 500 ``server_error``), and
    over both (was a 400 naming 16 000): a 400 naming 1 000 either way."""
    config = gateway_config(max_instructions_chars=LIMIT)
    async with serve(config, models) as (url, app):
        sdp = await offer_sdp()
        async with aiohttp.ClientSession() as http:
            for chars in (5_000, 20_000):
                session = {"type": "realtime", "instructions": "z" * chars}
                async with http.post(f"{url}/v1/realtime/calls", data=multipart(sdp, session)) as response:
                    assert_names_configured_limit(response.status, await response.json())
                async with http.post(
                    f"{url}/offer", json={"sdp": sdp, "type": "offer", "session": session}
                ) as response:
                    assert_names_configured_limit(response.status, await response.json())
            async with http.post(
                f"{url}/v1/realtime/client_secrets", json={"session": {"instructions": "z" * 5_000}}
            ) as response:
                assert_names_configured_limit(response.status, await response.json())
        assert app_idle(app) and all(unit.sessions_served == 0 for unit in app[POOL].units)


async def test_offer_session_within_the_configured_limit_is_answered(models, gateway_config):
    config = gateway_config(max_instructions_chars=LIMIT)
    async with serve(config, models) as (url, _app):
        sdp = await offer_sdp()
        async with aiohttp.ClientSession() as http:
            session = {"type": "realtime", "instructions": "z" * LIMIT}
            async with http.post(f"{url}/v1/realtime/calls", data=multipart(sdp, session)) as response:
                assert response.status == 201, await response.text()
                call_id = response.headers["Location"].rsplit("/", 1)[-1]
            async with http.delete(f"{url}/v1/realtime/calls/{call_id}") as response:
                assert response.status == 200
