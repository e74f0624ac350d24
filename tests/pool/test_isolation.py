"""Concurrent callers each get only their own transcripts and answers."""

from __future__ import annotations

import asyncio

from gateway.client import RealtimeClient
from tests.helpers import says, serve

QUESTIONS = ["What is the capital of Italy?", "How many legs does a spider have?", "Why is the sky blue?"]


async def test_three_concurrent_callers_are_isolated(models, speech, gateway_config):
    async with serve(gateway_config(pool_size=3, max_response_tokens=20), models) as (url, _app):
        clients = [RealtimeClient(url) for _ in QUESTIONS]
        assert await asyncio.gather(*(c.connect() for c in clients)) == [201, 201, 201]
        for client, question in zip(clients, QUESTIONS, strict=True):
            client.say(speech(question))
        await asyncio.gather(*(c.wait_for("response.done", timeout=150) for c in clients))

        response_ids = set()
        for client, question in zip(clients, QUESTIONS, strict=True):
            transcripts = client.of_type("conversation.item.input_audio_transcription.completed")
            assert len(transcripts) == 1
            heard = transcripts[0]["transcript"]
            # Each caller's transcript says its own question, and no other caller's.
            assert [asked for asked in QUESTIONS if says(heard, asked)] == [question], (question, heard)
            own = {e["response"]["id"] for e in client.of_type("response.created")}
            assert len(own) == 1
            foreign = [e for e in client.events if e.get("response_id") not in (None, *own)]
            assert foreign == []
            response_ids |= own
        assert len(response_ids) == 3
        await asyncio.gather(*(c.hangup() for c in clients))
