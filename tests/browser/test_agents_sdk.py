"""The stock client — the OpenAI Agents SDK for JavaScript (@openai/agents-realtime, its
OpenAIRealtimeWebRTC transport) — talks to the gateway from headless Chromium, cross-origin.

The SDK runs unmodified from a page on another origin (``http://localhost:P``) than the gateway
(``http://127.0.0.1:Q``), as in a real deployment: the page's own backend mints an ephemeral key
with the gateway's API key, and the browser calls the gateway with it, which needs the CORS
preflight to pass and ``Location`` (the call id) to be readable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.browser.conftest import INBOUND_AUDIO_JS, ROOT, console_collector, heard_the_question, unavailable
from tests.helpers import app_idle, free_port, serve, wait_until

pytestmark = pytest.mark.browser

BUNDLE = ROOT / ".cache" / "agents-sdk" / "agents-realtime.mjs"
PAGE = Path(__file__).with_name("agents_sdk_page.html")
API_KEY = "sk-browser-test"


@contextlib.asynccontextmanager
async def page_server(gateway_url: str, port: int) -> AsyncIterator[str]:
    """The application's own site on another origin: the test page, the SDK bundle, and ``/token``
    (its backend minting an ephemeral key from the gateway, so the API key never reaches the page)."""

    async def token(request: web.Request) -> web.Response:
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{gateway_url}/v1/realtime/client_secrets", headers={"Authorization": f"Bearer {API_KEY}"}, json={}
            ) as response:
                return web.json_response(await response.json(), status=response.status)

    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(PAGE)

    async def bundle(request: web.Request) -> web.FileResponse:
        return web.FileResponse(BUNDLE, headers={"Content-Type": "text/javascript"})

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/agents-realtime.mjs", bundle)
    app.router.add_post("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    # "localhost", not 127.0.0.1: a different origin from the gateway's, on the same machine.
    await web.TCPSite(runner, "localhost", port).start()
    try:
        yield f"http://localhost:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture(scope="session")
def agents_sdk_bundle() -> Path:
    """The SDK bundle made by scripts/build_agents_sdk_bundle.sh (scripts/setup.sh --browser)."""
    if not BUNDLE.exists():
        unavailable(f"{BUNDLE.relative_to(ROOT)} is missing: run scripts/build_agents_sdk_bundle.sh")
    return BUNDLE


def received(event_type: str) -> str:
    """JS predicate: an event of this type arrived on the data channel."""
    return f"window.sdk.received.some(e => e.type === {event_type!r})"


@pytest.mark.slow  # ~22 s (a Chromium, the SDK bundle and a spoken turn): the default suite reached 10:03 at stop 44
async def test_agents_sdk_webrtc_turn_cross_origin(
    chromium_path, agents_sdk_bundle, models, gateway_config, chromium, artifacts
):
    log: list[str] = []
    page_port = free_port()
    origin = f"http://localhost:{page_port}"
    # A comma-separated list, as VG_ALLOWED_ORIGINS is written in a deployment.
    config = gateway_config(pool_size=1, api_key=API_KEY, allowed_origins=f"https://app.example.com, {origin}")
    async with serve(config, models) as (gateway_url, app), page_server(gateway_url, page_port) as page_url:
        page = await chromium.new_page()
        console_collector(page, log)
        try:
            await page.goto(page_url + "/", timeout=15_000)
            await page.wait_for_function("window.sdkReady === true", timeout=15_000)

            # connect() resolves only after the gateway acknowledged the SDK's session.update.
            call = await asyncio.wait_for(page.evaluate("url => window.startCall(url)", gateway_url), 30)
            assert call["status"] == "connected" and call["callId"].startswith("rtc_"), call
            sent = await page.evaluate("window.sdk.sent.map(e => e.type)")
            assert sent[0] == "session.update", sent
            at_connect = await page.evaluate("window.sdk.receivedAtConnect")
            assert "session.updated" in at_connect, at_connect
            assert call["connectMs"] < 5000, call  # the SDK gives up waiting for the ack after 5 s

            # The fake microphone asks the question: the user transcript arrives, and the item the
            # SDK then retrieves (conversation.item.retrieve) lands in the session history.
            await page.wait_for_function(
                received("conversation.item.input_audio_transcription.completed"), timeout=60_000
            )
            transcript = await page.evaluate(
                "window.sdk.received.find(e => e.type === "
                "'conversation.item.input_audio_transcription.completed').transcript"
            )
            assert heard_the_question(transcript), transcript
            await page.wait_for_function(received("conversation.item.retrieved"), timeout=10_000)
            user_items = await page.evaluate(
                "window.sdk.history.filter(i => i.type === 'message' && i.role === 'user')"
                ".map(i => i.content.map(c => c.transcript || c.text || '').join(' '))"
            )
            assert transcript in [text.strip() for text in user_items], (transcript, user_items)

            # The assistant's spoken answer: its audio transcript, and audible audio on the track.
            await page.wait_for_function(received("output_audio_buffer.started"), timeout=60_000)
            pc = await page.evaluate_handle("() => window.sdk.transport.connectionState.peerConnection")
            before = await page.evaluate(INBOUND_AUDIO_JS, pc)
            await page.wait_for_function(received("response.output_audio_transcript.done"), timeout=60_000)
            said = await page.evaluate(
                "window.sdk.received.find(e => e.type === 'response.output_audio_transcript.done').transcript"
            )
            assert said.strip()
            await page.wait_for_function(received("output_audio_buffer.stopped"), timeout=60_000)
            await page.wait_for_function(
                "window.sdk.history.some(i => i.role === 'assistant' && "
                "i.content.some(c => (c.transcript || '').trim()))",
                timeout=10_000,
            )
            after = await page.evaluate(INBOUND_AUDIO_JS, pc)
            assert after["bytes"] - before["bytes"] > 5_000, (before, after)
            assert after["energy"] - before["energy"] > 1e-3, (before, after)  # audible, not silence

            # interrupt() while the assistant is speaking: playback is cleared at once.
            start = await page.evaluate("window.sdk.received.length")
            await page.evaluate(
                "window.sdk.session.sendMessage('Tell me a long story about a brave knight and a dragon.')"
            )
            await page.wait_for_function(
                f"window.sdk.received.slice({start}).some(e => e.type === 'output_audio_buffer.started')",
                timeout=60_000,
            )
            mark = await page.evaluate("window.sdk.sent.length")
            await page.evaluate("window.sdk.session.interrupt()")
            await page.wait_for_function(
                f"window.sdk.received.slice({start}).some(e => e.type === 'output_audio_buffer.cleared')",
                timeout=10_000,
            )
            sent_since = await page.evaluate(f"window.sdk.sent.slice({mark}).map(e => e.type)")
            assert "output_audio_buffer.clear" in sent_since, sent_since
            await page.wait_for_function(
                f"window.sdk.received.slice({start}).some(e => e.type === 'response.done')", timeout=30_000
            )
            statuses = await page.evaluate(
                f"window.sdk.received.slice({start}).filter(e => e.type === 'response.done')"
                ".map(e => e.response.status)"
            )
            # The SDK cancels only a response still being generated; one already generated is
            # just cut short in playback (the clear above).
            if "response.cancel" in sent_since:
                assert statuses[-1] == "cancelled", statuses

            # Nothing the SDK sent on its own (session.update with tracing, item retrieves, the
            # cancel/clear of interrupt()) was refused.
            errors = await page.evaluate("window.sdk.received.filter(e => e.type === 'error')")
            assert errors == [], errors
            assert await page.evaluate("window.sdk.errors") == []
            await page.screenshot(path=str(artifacts / "agents_sdk.png"))

            await page.evaluate("window.sdk.session.close()")
            assert await wait_until(lambda: app_idle(app), 10), "the unit did not return to idle"
        except BaseException:
            await page.screenshot(path=str(artifacts / "failure.png"))
            raise
        finally:
            wire = await page.evaluate(
                "JSON.stringify({sent: window.sdk.sent, received: window.sdk.received.map("
                "(e, i) => ({t_ms: window.sdk.times[i], ...e}))}, null, 1)"
            )
            (artifacts / "wire.json").write_text(wire)
            (artifacts / "console.log").write_text("\n".join(log))
            await page.close()


async def test_agents_sdk_refused_from_an_origin_not_allowed(
    chromium_path, agents_sdk_bundle, models, gateway_config, chromium, artifacts
):
    """The same page on an origin the gateway does not list: the browser's preflight fails, so the
    offer never reaches the gateway and connect() rejects."""
    from gateway.server.app import METRICS

    log: list[str] = []
    config = gateway_config(pool_size=1, api_key=API_KEY, allowed_origins="https://app.example.com")
    async with serve(config, models) as (gateway_url, app), page_server(gateway_url, free_port()) as page_url:
        page = await chromium.new_page()
        console_collector(page, log)
        try:
            await page.goto(page_url + "/", timeout=15_000)
            await page.wait_for_function("window.sdkReady === true", timeout=15_000)
            failure = await asyncio.wait_for(
                page.evaluate("url => window.startCall(url).then(() => null, (e) => String(e))", gateway_url), 30
            )
            assert failure and "fetch" in failure.lower(), failure
            assert any("CORS policy" in line for line in log), log
            answered = app[METRICS].registry.get_sample_value("vg_calls_total", {"result": "answered"})
            assert not answered, "the offer reached the gateway despite the failed preflight"
        finally:
            (artifacts / "console.log").write_text("\n".join(log))
            await page.close()
