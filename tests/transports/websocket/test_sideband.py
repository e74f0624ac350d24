"""Sideband control of a WebRTC call (``GET /v1/realtime?call_id=``): a server-side
WebSocket sees the call's events and steers it while the caller (aiortc, ``gateway.client``)
holds the media."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.client import RealtimeClient
from tests.helpers import QUESTION, app_idle, says, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

API_KEY = "sk-sideband-test"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


async def test_sideband_updates_instructions_mid_call_and_sees_the_call_events(models, speech, gateway_config):
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=24), models) as (url, app):
        caller = RealtimeClient(url)
        assert await caller.connect(headers=AUTH) == 201
        query = f"?call_id={caller.call_id}"
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with EventClient(url, query=query):
                pass
        assert refused.value.status == 401  # the API key is needed
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with EventClient(url, query="?call_id=rtc_nosuchcall", headers=AUTH):
                pass
        assert refused.value.status == 404

        async with EventClient(url, query=query, headers=AUTH) as control:
            # The server side changes the instructions; the caller's channel sees it too.
            mark = len(caller.events)
            await control.send("session.update", session={"instructions": "Answer in French, in one sentence."})
            updated = await control.wait_for("session.updated", timeout=10)
            assert updated["session"]["instructions"].startswith("Answer in French")
            await caller.wait_for("session.updated", after=mark, timeout=10)
            # Audio over the sideband is refused (it travels on the WebRTC track), on the sideband.
            await control.send("input_audio_buffer.append", audio="AAAA")
            assert (await control.wait_for("error", timeout=10))["error"]["code"] == "unsupported_event"

            caller.say(speech(QUESTION))
            done = await control.wait_for("response.done", timeout=90)
            assert done["response"]["status"] == "completed"
            heard = control.of_type("conversation.item.input_audio_transcription.completed")[-1]["transcript"]
            assert says(heard, QUESTION), heard
            await caller.wait_for("response.done", timeout=10)
            # Over the call, playback events are the server's to send (WebRTC): the sideband sees them.
            await control.wait_for("output_audio_buffer.stopped", timeout=30)
        # The sideband closing does not end the call.
        await asyncio.sleep(0.3)
        assert caller.call_id in app_calls(app)

        async with EventClient(url, query=query, headers=AUTH) as control:
            await asyncio.sleep(0.2)
            await caller.hangup()
            # The call ending closes the sideband.
            await asyncio.wait_for(control.closed.wait(), 10)
        assert await wait_until(lambda: app_idle(app), 10)


def app_calls(app) -> dict:
    from gateway.server.app import SESSIONS

    return app[SESSIONS].sessions


@pytest.mark.slow  # a real model turn
async def test_a_sideband_gets_the_gateway_events_only_when_it_asks(models, gateway_config):
    """The call's own client asked for ``gateway.latency`` (the demo page and ``gateway.client``
    do): a stock SDK's sideband on that call, which did not ask, got it too, an event that is no
    OpenAI event (README: a stock client sees only OpenAI's events)."""
    async with serve(gateway_config(max_response_tokens=16), models) as (url, _app):
        caller = RealtimeClient(url)  # asks ?gateway_events=gateway.latency,gateway.barge_in
        assert await caller.connect() == 201
        query = f"?call_id={caller.call_id}"
        async with (
            EventClient(url, query=query) as stock,
            EventClient(url, query=query + "&gateway_events=gateway.latency") as asking,
        ):
            await asyncio.sleep(0.2)  # both attached
            caller.ask("Say hello.")
            await caller.wait_for("gateway.latency", timeout=90)
            await asking.wait_for("gateway.latency", timeout=10)
            await stock.wait_for("response.done", timeout=10)
            await asyncio.sleep(0.3)
            assert stock.events and not [e for e in stock.events if e["type"].startswith("gateway.")]
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with EventClient(url, query=query + "&gateway_events=gateway.nope"):
                pass
        assert refused.value.status == 400
        await caller.hangup()
        await caller.close()
