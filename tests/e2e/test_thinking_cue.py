"""The thinking cue over real WebRTC ("no dead air": a tool call running, a late first answer audio).

A gateway on loopback with the real models, except a language model double that answers late
(``SlowLanguageModelDouble``) or calls a tool (``ToolCallingLanguageModelDouble``). The client
(``gateway.client``, aiortc) hears the call's audio: with ``--thinking-cue tone`` a late answer is
preceded by the quiet cue, which stops when the answer starts; with the default (off) the wait is
silent; a tool call's wait plays it; barge-in and the hang-up stop it, and the next caller of the
unit hears none of it. Orderings only, no wall-clock bounds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import numpy as np
import pytest

from gateway.client import RealtimeClient
from gateway.media.resample import Resampler
from gateway.server.app_keys import POOL
from tests.doubles import SlowLanguageModelDouble, ToolCallingLanguageModelDouble
from tests.helpers import app_idle, says, serve, wait_until, words

CUE_PEAK = (300, 3000)  # the -30 dBFS tone (peak ~1040) through Opus; the answer's speech peaks far above
SILENT = 100
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def peaks(client: RealtimeClient, start: float, end: float) -> list[int]:
    """Peak level of each 20 ms frame the client heard between ``start`` and ``end`` (monotonic s)."""
    return [
        int(np.abs(f.astype(np.int32)).max()) if f.size else 0
        for f, t in zip(client.heard.frames, client.heard.arrivals, strict=False)
        if start <= t < end
    ]


def cue_frames(levels: list[int]) -> int:
    return sum(CUE_PEAK[0] < p < CUE_PEAK[1] for p in levels)


def slow(models, delay_s: float):
    return dataclasses.replace(models, llm=SlowLanguageModelDouble(models.llm, delay_s))


async def test_late_answer_is_preceded_by_the_cue_which_stops_when_it_starts(models, gateway_config):
    config = gateway_config(thinking_cue="tone", max_response_tokens=12)
    async with serve(config, slow(models, 4.0)) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        mark = client.ask("Say hello.")
        asked = time.monotonic()
        started = await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        stopped = await client.wait_for("output_audio_buffer.stopped", timeout=60, after=mark)
        t_started, t_stopped = client.time_of(started), client.time_of(stopped)
        await asyncio.sleep(1.0)
        before = peaks(client, asked, t_started - 0.1)
        assert cue_frames(before) >= 5, before  # the cue (a note of it at least) was heard before the answer
        assert max(before) < CUE_PEAK[1], "the cue is quiet, well below speech"
        answer = peaks(client, t_started, t_stopped)
        assert max(answer) > 3 * CUE_PEAK[1]  # the answer itself is speech
        after = peaks(client, t_stopped + 0.3, t_stopped + 1.0)
        assert after and max(after) < SILENT, "the cue came back after the answer"
        # Nothing of the cue in the protocol: the conversation holds the answer's words only.
        done = await client.wait_for("response.done", timeout=10, after=mark)
        assert done["response"]["status"] == "completed"
        await client.hangup()


async def test_without_the_setting_the_wait_is_silent(models, gateway_config):
    async with serve(gateway_config(max_response_tokens=12), slow(models, 3.0)) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        mark = client.ask("Say hello.")
        asked = time.monotonic()
        started = await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        before = peaks(client, asked, client.time_of(started) - 0.1)
        assert before and max(before) < SILENT, before
        await client.hangup()


@pytest.mark.slow
async def test_a_session_turns_it_on_and_a_tool_calls_wait_plays_it(models, gateway_config):
    llm = ToolCallingLanguageModelDouble(models.llm, 0.1, arguments=json.dumps({"city": "Paris"}))
    config = gateway_config(max_response_tokens=16)
    async with serve(config, dataclasses.replace(models, llm=llm)) as (url, _app):
        client = RealtimeClient(url)
        session = {"type": "realtime", "tools": [WEATHER], "audio": {"output": {"thinking_cue": "tone"}}}
        await client.connect(session=session)
        assert "thinking_cue" not in client.of_type("session.updated")[-1]["session"]["audio"]["output"]
        mark = client.ask("What's the weather in Paris?")
        done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
        call = done["output"][-1]
        assert call["type"] == "function_call", done
        t_done = client.time_of(client.of_type("response.done", after=mark)[0])
        await asyncio.sleep(3.0)  # the app's tool runs: the cue plays (due 1.5 s after the request)
        waiting = peaks(client, t_done, t_done + 3.0)
        assert cue_frames(waiting) >= 5, waiting
        output = {"city": "Paris", "temperature_c": 31, "sky": "sunny"}
        item = {"type": "function_call_output", "call_id": call["call_id"], "output": json.dumps(output)}
        mark = len(client.events)
        client.send({"type": "conversation.item.create", "item": item})
        client.send({"type": "response.create"})
        await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        stopped = await client.wait_for("output_audio_buffer.stopped", timeout=60, after=mark)
        await asyncio.sleep(1.0)
        after = peaks(client, client.time_of(stopped) + 0.3, client.time_of(stopped) + 1.0)
        assert after and max(after) < SILENT, after
        await client.hangup()


@pytest.mark.slow
async def test_barge_in_and_the_hang_up_stop_the_cue(models, speech, gateway_config):
    config = gateway_config(thinking_cue="tone", max_response_tokens=12)
    async with serve(config, slow(models, 30.0)) as (url, app):
        unit = app[POOL].units[0]
        client = RealtimeClient(url)
        await client.connect()
        client.ask("Say hello.")
        assert await wait_until(lambda: unit.cue.sounding, timeout=20)
        mark = len(client.events)
        client.say(speech("Stop. What time is it?"))
        speaking = await client.wait_for("input_audio_buffer.speech_started", timeout=20, after=mark)
        stopped = await client.wait_for("input_audio_buffer.speech_stopped", timeout=20, after=mark)
        assert cue_frames(peaks(client, client.time_of(speaking) - 1.0, client.time_of(speaking))) > 0
        cut = peaks(client, client.time_of(speaking) + 0.2, client.time_of(stopped))
        assert cut and max(cut) < SILENT, cut  # silent while the caller speaks
        # The caller's new turn is late too: the cue comes back for it; the hang-up ends it.
        assert await wait_until(lambda: unit.cue.sounding, timeout=30)
        await client.hangup()
        assert await wait_until(lambda: app_idle(app), timeout=20)
        assert not unit.cue.armed
        following = RealtimeClient(url)
        await following.connect()
        joined = time.monotonic()
        await asyncio.sleep(2.0)
        heard = peaks(following, joined, joined + 2.0)
        assert heard and max(heard) < SILENT, "the last caller's cue reached the next one"
        await following.hangup()


@pytest.mark.slow
async def test_a_filler_is_the_sessions_voice_saying_one_moment_once(models, gateway_config):
    async with serve(gateway_config(max_response_tokens=12), slow(models, 6.0)) as (url, _app):
        client = RealtimeClient(url)
        await client.connect(session={"type": "realtime", "audio": {"output": {"thinking_cue": "filler"}}})
        await asyncio.sleep(3.0)  # the filler is synthesized once, off the event loop, after the update
        mark = client.ask("Say hello.")
        asked = time.monotonic()
        started = await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        wait = client.heard.samples(asked)[: int(48000 * (client.time_of(started) - asked - 0.1))]
        audio16k = Resampler(16000).resample_array(wait, 48000).astype(np.float32) / 32768
        heard = models.stt.transcribe(audio16k, "en")
        assert says(heard, "One moment.") and len(words(heard)) <= 3, heard  # said once
        assert not [e for e in client.events[mark:] if "moment" in json.dumps(e).lower()]  # not in any event
        await client.hangup()
