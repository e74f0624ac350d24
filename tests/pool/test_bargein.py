"""Barge-in over real WebRTC — the caller speaks over the answer and it stops at once."""

from __future__ import annotations

import asyncio

from gateway.client import RealtimeClient
from tests.helpers import serve

LONG_ANSWER = "Tell me a long story about a brave little dragon."


async def speak_over_the_answer(client: RealtimeClient, speech, after_clauses: int = 0) -> tuple[float, int]:
    """Ask for a long answer, talk over it once it plays; returns (speech_started time, its index).

    ``after_clauses`` > 0: talk as soon as that many clauses of the answer are queued for playout
    (their transcript deltas arrived), so part of the answer's words is surely still unheard;
    else 1 s into its audio."""
    client.say(speech(LONG_ANSWER))
    await client.wait_for("output_audio_buffer.started", timeout=90)
    if after_clauses:
        await client.wait_for("response.output_audio_transcript.delta", timeout=90, count=after_clauses)
    else:
        await asyncio.sleep(1.0)
    mark = len(client.events)
    client.say(speech("Stop. What time is it?"))
    started = await client.wait_for("input_audio_buffer.speech_started", timeout=10, after=mark)
    return client.time_of(started), client.events.index(started)


async def test_barge_in_stops_reply_audio_within_100ms(models, speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=80), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        t_speech, index = await speak_over_the_answer(client, speech)
        cleared = await client.wait_for("output_audio_buffer.cleared", timeout=5, after=index)
        cancelled = await client.wait_for("response.done", timeout=5, after=index)
        assert cancelled["response"]["status"] == "cancelled"
        assert cleared["response_id"] == cancelled["response"]["id"]

        # Let the new turn be answered, then look at what arrived between barge-in and the next reply.
        next_start = await client.wait_for("output_audio_buffer.started", timeout=90, after=index)
        t_next = client.time_of(next_start)
        # speech_started comes when the words are judged (the reply paused at the voice onset, up to
        # ~1.5 s before it on a loaded machine): look back far enough to find the answer playing.
        old_reply = [t for t in client.heard.voiced_times() if t_speech - 3.0 <= t < t_next]
        assert old_reply, "the first answer was not playing when the caller spoke"
        last_old = max(old_reply)
        assert last_old - t_speech <= 0.100, (
            f"reply audio went on {1000 * (last_old - t_speech):.0f} ms after speech_started"
        )
        # Nothing of the cancelled answer after the clear: all deltas of it came before.
        old_id = cancelled["response"]["id"]
        later = [
            e
            for e in client.events[client.events.index(cleared) :]
            if e.get("response_id") == old_id and e["type"].startswith("response.output_audio_transcript.delta")
        ]
        assert later == []
        await client.hangup()


async def test_interrupted_answer_is_truncated_to_what_was_heard(models, speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=80), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        # A fixed 1 s could fall when only the first clause was queued, all of it heard (heard == deltas).
        _, index = await speak_over_the_answer(client, speech, after_clauses=2)
        done = await client.wait_for("response.done", timeout=5, after=index)
        item = done["response"]["output"][0]
        heard = item["content"][0]["transcript"]
        deltas = "".join(
            e["delta"]
            for e in client.of_type("response.output_audio_transcript.delta")
            if e["response_id"] == done["response"]["id"]
        )
        assert heard and len(heard.split()) < len(deltas.split()), (heard, deltas)
        retrieved_at = len(client.events)
        client.send({"type": "conversation.item.retrieve", "item_id": item["id"], "event_id": "evt_r1"})
        got = await client.wait_for("conversation.item.retrieved", timeout=5, after=retrieved_at)
        assert got["item"]["content"][0]["transcript"] == heard
        await client.hangup()


async def test_echo_guard_ignores_short_noise(models, speech, gateway_config):
    """Speech shorter than min_speech_ms (e.g. echo of our own click) does not interrupt."""
    import numpy as np

    async with serve(gateway_config(min_speech_ms=600), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        client.say(speech(LONG_ANSWER))
        await client.wait_for("output_audio_buffer.started", timeout=90)
        mark = len(client.events)
        client.say(speech("Hey.")[: int(48000 * 0.35)].astype(np.int16))
        await asyncio.sleep(2.0)
        assert not [
            e
            for e in client.events[mark:]
            if e["type"] in ("output_audio_buffer.cleared", "input_audio_buffer.speech_started")
        ]
        await client.hangup()
