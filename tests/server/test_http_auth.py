"""The HTTP side of the Realtime contract: API key and ephemeral keys (GA client_secrets
flow), the multipart offer with a session, and CORS for browser clients."""

from __future__ import annotations

import json
import time

import aiohttp
from aiortc import RTCPeerConnection

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.server.app_keys import KEYS, POOL
from tests.helpers import free_port, serve, wait_until

API_KEY = "sk-test-gateway"


async def mint(
    http: aiohttp.ClientSession, url: str, body: dict | None = None, key: str = API_KEY
) -> aiohttp.ClientResponse:
    response = await http.post(
        f"{url}/v1/realtime/client_secrets", json=body or {}, headers={"Authorization": f"Bearer {key}"}
    )
    await response.read()
    return response


async def call_with(url: str, token: str | None, **connect) -> RealtimeClient:
    client = RealtimeClient(url)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    await client.connect(headers=headers, **connect)
    return client


async def test_api_key_and_single_use_ephemeral_keys(models, gateway_config):
    async with serve(gateway_config(api_key=API_KEY, pool_size=2), models) as (url, _app):
        async with aiohttp.ClientSession() as http:
            assert (await mint(http, url, key="sk-wrong")).status == 401
            response = await mint(http, url, {"session": {"type": "realtime", "instructions": "From the key."}})
            assert response.status == 200
            secret = await response.json()
            assert secret["value"].startswith("ek_") and abs(secret["expires_at"] - (time.time() + 60)) <= 2
            assert secret["session"]["instructions"] == "From the key."

            for token in (None, "sk-wrong", "ek_made_up"):
                refused = await call_with(url, token)
                assert refused.status == 401, token
                assert json.loads(refused.error_body)["error"]["code"] == "invalid_api_key"
                await refused.close()

            with_key = await call_with(url, secret["value"])
            assert with_key.status == 201
            # The key's session config is where the call starts.
            assert with_key.of_type("session.created")[0]["session"]["instructions"] == "From the key."
            again = await call_with(url, secret["value"])
            assert again.status == 401, "an ephemeral key opens one call only"
            await again.close()
            await with_key.hangup()

            with_api_key = await call_with(url, API_KEY)
            assert with_api_key.status == 201
            await with_api_key.hangup()


async def test_ephemeral_key_expires_and_survives_a_refused_call(models, gateway_config):
    async with serve(gateway_config(api_key=API_KEY, pool_size=1), models) as (url, app):
        async with aiohttp.ClientSession() as http:
            assert (await mint(http, url, {"expires_after": {"anchor": "created_at", "seconds": 5}})).status == 400
            short = await (await mint(http, url, {"expires_after": {"anchor": "created_at", "seconds": 10}})).json()
            assert abs(short["expires_at"] - (time.time() + 10)) <= 2
            retried = (await (await mint(http, url)).json())["value"]
            unused = (await (await mint(http, url)).json())["value"]

            keys = app[KEYS]
            real_clock = keys.clock
            keys.clock = lambda: real_clock() + 30  # past the 10 s key, inside the 60 s (default) ones
            expired = await call_with(url, short["value"])
            assert expired.status == 401
            await expired.close()

            busy = await call_with(url, API_KEY)  # the only unit is taken
            refused = await call_with(url, retried)
            assert refused.status == 503
            await refused.close()
            await busy.hangup()
            assert await wait_until(lambda: all(u.state.value == "idle" for u in app[POOL].units), 10)
            # The refused call did not use the key up: the browser can retry with it.
            retry = await call_with(url, retried)
            assert retry.status == 201
            await retry.hangup()

            keys.clock = lambda: real_clock() + 61
            late = await call_with(url, unused)
            assert late.status == 401, "a default key lasts 60 s"
            await late.close()


async def test_multipart_offer_session_is_applied(models, gateway_config):
    async with serve(gateway_config(pool_size=2), models) as (url, _app):
        session = {
            "type": "realtime",
            "model": "gpt-realtime",
            "instructions": "Speak like a pirate.",
            "output_modalities": ["text"],
            "audio": {
                "input": {
                    "turn_detection": {"type": "semantic_vad", "eagerness": "low"},
                    "transcription": {"model": "gpt-4o-mini-transcribe"},
                },
                "output": {"voice": "marin", "speed": 1.1},
            },
        }
        client = RealtimeClient(url)
        assert await client.connect(offer_session=session) == 201
        created = client.of_type("session.created")[0]["session"]
        assert created["instructions"] == "Speak like a pirate." and created["output_modalities"] == ["text"]
        assert created["audio"]["input"]["turn_detection"]["type"] == "semantic_vad"
        assert created["audio"]["input"]["turn_detection"]["eagerness"] == "low"
        assert created["audio"]["output"]["voice"] == "joe" and created["audio"]["output"]["speed"] == 1.1
        assert created["model"] == "qwen2.5-coder-1.5b"
        assert created["audio"]["input"]["transcription"]["model"] == "whisper-base"
        client.send({"type": "session.update", "session": {"type": "realtime", "audio": {"output": {"speed": 1.0}}}})
        updated = (await client.wait_for("session.updated", timeout=10))["session"]
        assert updated["instructions"] == "Speak like a pirate." and updated["audio"]["output"]["speed"] == 1.0
        await client.hangup()

        # A browser's FormData.set("sdp", text) sends plain text parts (no content type).
        pc = RTCPeerConnection()
        pc.addTransceiver("audio")
        pc.createDataChannel("oai-events")
        await pc.setLocalDescription(await pc.createOffer())
        form = aiohttp.FormData(default_to_multipart=True)
        form.add_field("sdp", pc.localDescription.sdp)
        form.add_field("session", json.dumps({"type": "realtime", "instructions": "Plain parts."}))
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/realtime/calls", data=form) as response:
                assert response.status == 201, await response.text()
                assert "m=audio" in await response.text()
                location = response.headers["Location"]
            async with http.delete(f"{url}{location}") as response:
                assert response.status == 200
        await pc.close()

        bad = RealtimeClient(url)
        invalid = {"type": "realtime", "audio": {"output": {"speed": "fast"}}}
        assert await bad.connect(offer_session=invalid) == 400
        error = json.loads(bad.error_body)["error"]
        assert error["param"] == "session.audio.output.speed"
        await bad.close()


async def _offer_with_events() -> tuple[RTCPeerConnection, list[dict]]:
    """An aiortc offer (audio + ``oai-events``) and the list its data channel's events go to."""
    pc = RTCPeerConnection()
    pc.addTransceiver("audio")
    channel = pc.createDataChannel("oai-events")
    events: list[dict] = []
    channel.on("message", lambda message: events.append(json.loads(message)))
    await pc.setLocalDescription(await pc.createOffer())
    return pc, events


def _created(events: list[dict]) -> dict | None:
    return next((event["session"] for event in events if event["type"] == "session.created"), None)


async def test_json_offer_as_the_openai_sdk_sends_it(models, gateway_config):
    """``client.realtime.calls.create(sdp=..., session=...)`` of the OpenAI Python SDK posts
    ``application/json`` ``{"sdp", "session"}`` (``Accept: application/sdp``); the answer is the
    same as for a raw SDP offer, and the session config is where the call starts."""
    from aiortc import RTCSessionDescription

    async with serve(gateway_config(pool_size=1), models) as (url, app):
        pc, events = await _offer_with_events()
        body = {"sdp": pc.localDescription.sdp, "session": {"type": "realtime", "instructions": "From the SDK."}}
        async with aiohttp.ClientSession() as http:
            accept = {"Accept": "application/sdp"}
            async with http.post(f"{url}/v1/realtime/calls", json=body, headers=accept) as response:
                answer = await response.text()
                assert response.status == 201, answer
                assert response.content_type == "application/sdp" and "m=audio" in answer
                location = response.headers["Location"]
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            assert await wait_until(lambda: _created(events) is not None, 20)
            assert _created(events)["instructions"] == "From the SDK."
            async with http.delete(f"{url}{location}") as response:
                assert response.status == 200
            await pc.close()
            assert await wait_until(lambda: all(u.state.value == "idle" for u in app[POOL].units), 10)

            too_fast = {"type": "realtime", "audio": {"output": {"speed": "fast"}}}
            for bad, code in (
                ({"session": {"type": "realtime"}}, "invalid_offer"),
                ("not json", "invalid_json"),
                ({"sdp": "v=0", "session": "pirate"}, "invalid_type"),
                ({"sdp": "v=0", "session": too_fast}, "invalid_value"),
            ):
                data = bad if isinstance(bad, str) else json.dumps(bad)
                async with http.post(
                    f"{url}/v1/realtime/calls", data=data, headers={"Content-Type": "application/json"}
                ) as response:
                    assert response.status == 400, (bad, await response.text())
                    assert (await response.json())["error"]["code"] == code, bad
        assert app[POOL].units[0].sessions_served == 1


async def test_offer_from_the_openai_python_sdk(models, gateway_config):
    """The OpenAI Python SDK itself, pointed at the gateway: ``realtime.calls.create`` (JSON in
    some releases, a multipart form with ``application/sdp`` and ``application/json`` parts in
    others) opens a call. Skipped where the ``openai`` package is not installed (failed under CI)."""
    from tests.helpers import require_module

    openai = require_module("openai", "pip install -e '.[test]'")
    from aiortc import RTCSessionDescription

    async with serve(gateway_config(pool_size=1), models) as (url, app):
        pc, events = await _offer_with_events()
        client = openai.AsyncOpenAI(api_key="sk-unused", base_url=f"{url}/v1")
        session = {"type": "realtime", "instructions": "From the real SDK."}
        response = await client.realtime.calls.with_raw_response.create(sdp=pc.localDescription.sdp, session=session)
        assert response.status_code == 201
        answer = response.text
        location = response.headers["Location"]
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        assert await wait_until(lambda: _created(events) is not None, 20)
        assert _created(events)["instructions"] == "From the real SDK."
        await client.realtime.calls.hangup(location.rsplit("/", 1)[-1])
        await client.close()
        await pc.close()
        assert await wait_until(lambda: all(u.state.value == "idle" for u in app[POOL].units), 10)


async def test_cors_preflight_for_browser_realtime_clients(models):
    origin = "https://app.example"
    environ = {"VG_ALLOWED_ORIGINS": origin, "VG_API_KEY": API_KEY}
    config = GatewayConfig.from_env(environ, port=free_port(), pool_size=1)
    async with serve(config, models) as (url, _app):
        async with aiohttp.ClientSession() as http:
            asked = "authorization, content-type, openai-beta, x-openai-agents-sdk"
            preflight = await http.options(
                f"{url}/v1/realtime/calls",
                headers={
                    "Origin": origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": asked,
                },
            )
            assert preflight.status == 204
            assert preflight.headers["Access-Control-Allow-Origin"] == origin
            assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
            allowed = {h.strip().lower() for h in preflight.headers["Access-Control-Allow-Headers"].split(",")}
            assert {"authorization", "content-type", "openai-beta", "x-openai-agents-sdk"} <= allowed

            bare = await http.options(
                f"{url}/v1/realtime/client_secrets", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
            )
            defaults = {h.strip().lower() for h in bare.headers["Access-Control-Allow-Headers"].split(",")}
            assert {"authorization", "content-type", "openai-beta"} <= defaults

            # The real request: errors are readable by the page, and Location is exposed.
            denied = await http.post(f"{url}/v1/realtime/calls", data="v=0", headers={"Origin": origin})
            assert denied.status == 401 and denied.headers["Access-Control-Allow-Origin"] == origin
            assert "location" in denied.headers["Access-Control-Expose-Headers"].lower()

            stranger = await http.options(
                f"{url}/v1/realtime/calls",
                headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
            )
            assert "Access-Control-Allow-Origin" not in stranger.headers
