"""Caller audio over the Realtime WebSocket costs what real time costs. A client flooding
``input_audio_buffer.append`` with large appends used to have each one base64-decoded and
resampled on the event loop (~0.4 s for 8 MiB of PCM, ~0.9 s of G.711) and queued whole: every
call of the process stalled, and the unit could queue gigabytes. Now a session takes a burst of
audio, then 4 s of audio a second; the rest is dropped before it is decoded (an append too large
for it before it is even parsed), with one ``rate_limit_exceeded`` per flood, and the session
goes on; what it takes is decoded off the loop, in order with commits."""

from __future__ import annotations

import asyncio
import base64
import json

import aiohttp
import numpy as np
import pytest
from aiohttp import web

from gateway.client import RealtimeClient
from gateway.media.audio_format import PCM16_24K, OutputAudioEncoder
from gateway.pool.unit import UnitState
from gateway.realtime.audio_intake import AUDIO_BURST_S
from gateway.server.app_keys import METRICS, POOL, SESSIONS
from gateway.server.runner import free_port
from gateway.transports.websocket.event_socket import FRAMES_PER_TURN, EventSocket, websocket_response
from tests.helpers import QUESTION, says, serve
from tests.transports.websocket.ws_client import EventClient

RNG_SEED = 7


def noise_append(size: int, seed: int = RNG_SEED) -> str:
    """An ``input_audio_buffer.append`` message whose audio is ``size`` random bytes (base64)."""
    data = np.random.default_rng(seed).integers(0, 256, size, np.uint8).tobytes()
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(data).decode()})


def limited(client: EventClient, mark: int = 0) -> list[dict]:
    return [e["error"] for e in client.of_type("error", mark) if e["error"]["code"] == "rate_limit_exceeded"]


async def marker(client: EventClient) -> None:
    """Send ``input_audio_buffer.clear`` and wait for its ``cleared``: it comes after the appends
    before it were decoded and submitted (or dropped)."""
    mark = len(client.events)
    await client.send("input_audio_buffer.clear")
    await client.wait_for("input_audio_buffer.cleared", after=mark, timeout=60)


async def test_a_flood_of_large_appends_gets_one_error_and_the_session_still_answers(models, speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=24), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            silence = base64.b64encode(np.zeros(24000 * 10, "<i2").tobytes()).decode()  # 10 s
            for _ in range(2):  # the burst, taken whole
                await client.send("input_audio_buffer.append", audio=silence)
            for seed in range(5):  # 5 appends of 1.5 MiB: ~25 s of audio each, more than any burst
                await client.send_raw(noise_append(1536 * 1024 * 3 // 4, seed))
            await marker(client)
            errors = limited(client)
            assert len(errors) == 1, client.error_codes()  # one error for the whole flood
            assert errors[0]["type"] == "rate_limit_error" and "audio" in errors[0]["message"]
            assert client.error_codes() == ["rate_limit_exceeded"]
            # The burst reached the VAD (less the resampler's delay), none of the flood.
            taken = app[METRICS].usage().audio_in_s
            assert AUDIO_BURST_S - 0.1 <= taken <= AUDIO_BURST_S, taken
            assert app[POOL].units[0].state is UnitState.ACTIVE
            # The session goes on: a spoken question, streamed at real time, is heard and answered.
            mark = len(client.events)
            await client.stream(speech(QUESTION), silence_s=1.2)
            done = await client.wait_for("response.done", after=mark, timeout=90)
            heard = client.of_type("conversation.item.input_audio_transcription.completed", mark)[-1]
            assert says(heard["transcript"], QUESTION), heard
            assert done["response"]["status"] == "completed"
            assert client.error_codes() == ["rate_limit_exceeded"]


async def test_an_append_too_large_for_the_budget_is_refused_unparsed_and_undecoded(models, gateway_config):
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            audio = json.loads(noise_append(1536 * 1024 * 3 // 4))["audio"]  # ~25 s of 24 kHz PCM
            # Not even JSON (no end): refused by its length, so never parsed (no invalid_json).
            await client.send_raw('{"type": "input_audio_buffer.append", "audio": "' + audio)
            error = (await client.wait_for("error", timeout=20))["error"]
            assert (error["code"], error["type"]) == ("rate_limit_exceeded", "rate_limit_error")
            # A character no base64 has, in the middle: dropped before decoding (no invalid_value),
            # and silently (the flood was told already).
            half = len(audio) // 2
            await client.send("input_audio_buffer.append", audio=audio[:half] + "!!!!" + audio[half + 4 :])
            await marker(client)
            assert client.error_codes() == ["rate_limit_exceeded"]
            assert app[METRICS].usage().audio_in_s == 0
            # Above OpenAI's 15 MiB an event (and this gateway's 8 MiB): refused unparsed, with an error.
            mark = len(client.events)
            await client.send_raw('{"type": "input_audio_buffer.append", "audio": "' + "A" * (15_500 * 1024))
            too_large = (await client.wait_for("error", after=mark, timeout=30))["error"]
            assert too_large["code"] == "message_too_large", too_large
            assert app[POOL].units[0].state is UnitState.ACTIVE


@pytest.mark.parametrize("codec", ["pcmu", "pcma"])
async def test_a_webrtc_caller_beside_a_g711_flooder_is_heard_and_answered(models, speech, gateway_config, codec):
    async with serve(gateway_config(pool_size=2, max_response_tokens=24), models) as (url, app):
        caller = RealtimeClient(url)
        assert await caller.connect() == 201
        try:
            async with EventClient(url) as flooder:
                await flooder.wait_for("session.created", timeout=10)
                session = {"type": "realtime", "audio": {"input": {"format": {"type": f"audio/{codec}"}}}}
                await flooder.send("session.update", session=session)
                await flooder.wait_for("session.updated", timeout=10)
                appends = 8  # 1 MiB each: ~98 s of 8 kHz G.711 (24 MiB once decoded to 16 kHz)
                flood = asyncio.ensure_future(
                    asyncio.gather(*[flooder.send_raw(noise_append(786432, seed)) for seed in range(appends)])
                )
                mark = len(caller.events)
                caller.say(speech(QUESTION))
                done = await caller.wait_for("response.done", timeout=90, after=mark)
                heard = caller.of_type("conversation.item.input_audio_transcription.completed", after=mark)[-1]
                assert says(heard["transcript"], QUESTION), heard
                assert done["response"]["status"] == "completed"
                await asyncio.wait_for(flood, 60)
                await marker(flooder)
                assert flooder.error_codes() == ["rate_limit_exceeded"]
                flooded = next(s for s in app[SESSIONS].sessions.values() if s.id.startswith("ws_"))
                assert flooded.realtime.audio_intake.budget.refused == appends  # none was decoded
                assert all(unit.state is UnitState.ACTIVE for unit in app[POOL].units)
        finally:
            await caller.hangup()


async def test_a_commit_right_after_a_long_append_covers_all_of_it(models, speech, gateway_config):
    """Decoding runs off the loop: a commit sent at once still comes after the audio before it."""
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            manual = {"type": "realtime", "audio": {"input": {"turn_detection": None}}}
            await client.send("session.update", session=manual)
            await client.wait_for("session.updated", timeout=10)
            question = np.concatenate([speech(QUESTION), np.zeros(48000 // 2, np.int16)])
            data = OutputAudioEncoder(PCM16_24K, 48000).encode(question)
            await client.send("input_audio_buffer.append", audio=base64.b64encode(data).decode())
            await client.send("input_audio_buffer.commit", event_id="evt_commit")
            await client.wait_for("input_audio_buffer.committed", timeout=10)
            item = await client.wait_for("conversation.item.added", timeout=10)
            assert item["item"]["role"] == "user"
            heard = await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=30)
            assert says(heard["transcript"], QUESTION), heard
            assert not client.of_type("error")


async def test_a_flood_of_small_frames_lets_the_loop_run_between_them():
    """aiohttp queues many small frames at once, and reading a queued one does not yield: 3000
    empty events sent at once were handled in runs of ~1000 while every other call waited."""
    handled = [0]
    runs: list[int] = []

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = websocket_response([])
        await ws.prepare(request)
        await EventSocket(ws).receive(lambda text: handled.__setitem__(0, handled[0] + 1), lambda data: None)
        return ws

    async def watch() -> None:  # another task of the loop: how many frames were handled between its turns
        seen = 0
        while True:
            await asyncio.sleep(0)
            runs.append(handled[0] - seen)
            seen = handled[0]

    app = web.Application()
    app.router.add_get("/ws", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    watcher = asyncio.ensure_future(watch())
    try:
        async with aiohttp.ClientSession() as http, http.ws_connect(f"ws://127.0.0.1:{port}/ws") as ws:
            for _ in range(3000):
                await ws.send_str("{}")
            for _ in range(2000):
                if handled[0] == 3000:
                    break
                await asyncio.sleep(0.01)
        assert handled[0] == 3000
        assert max(runs) <= FRAMES_PER_TURN, max(runs)
    finally:
        watcher.cancel()
        await runner.cleanup()
