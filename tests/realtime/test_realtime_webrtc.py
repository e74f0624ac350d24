"""The Realtime protocol over real WebRTC (aiortc on loopback) with the real models.

Each test is one short call; every wait is bounded. Replies are kept short through the session
(``max_output_tokens``) so the LLM and TTS steps stay a few seconds on a small CPU.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

from gateway.client import RealtimeClient
from gateway.realtime.session import MAX_CLIENT_MESSAGE_BYTES
from tests.helpers import QUESTION, says, serve, wait_until

BRIEF = {
    "type": "realtime",
    "instructions": "You are a helpful assistant. Answer in one short sentence.",
    "max_output_tokens": 24,
}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text.lower()))


def types_after(client: RealtimeClient, mark: int) -> list[str]:
    return [e["type"] for e in client.events[mark:]]


def in_order(types: list[str], expected: list[str]) -> bool:
    """``expected`` occurs in ``types`` as a subsequence (other events may come in between)."""
    remaining = iter(types)
    return all(name in remaining for name in expected)


def voiced_seconds(client: RealtimeClient, since: float, until: float = float("inf")) -> float:
    return 0.02 * len([t for t in client.heard.voiced_times() if since <= t <= until])


async def test_text_turn_gets_a_spoken_answer_and_one_response_at_a_time(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect(session=BRIEF) == 201
        mark = client.ask("What is the capital of France?")
        await client.wait_for("response.created", timeout=10, after=mark)
        client.send({"type": "response.create", "event_id": "evt_again"})
        error = (await client.wait_for("error", timeout=10, after=mark))["error"]
        assert error["code"] == "conversation_already_has_active_response" and error["event_id"] == "evt_again"

        done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
        stopped = await client.wait_for("output_audio_buffer.stopped", timeout=30, after=mark)
        assert done["status"] == "completed" and done["id"] == stopped["response_id"]
        spoken = done["output"][0]["content"][0]
        assert spoken["type"] == "output_audio" and spoken["transcript"].strip()
        deltas = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta", after=mark))
        assert deltas.split() == spoken["transcript"].split()
        assert (
            client.of_type("response.output_audio_transcript.done", after=mark)[-1]["transcript"]
            == spoken["transcript"]
        )

        started = client.time_of(client.of_type("output_audio_buffer.started", after=mark)[-1])
        assert voiced_seconds(client, started - 0.2, client.time_of(stopped) + 0.5) >= 0.3, "the answer was not heard"
        assert in_order(
            types_after(client, mark),
            [
                "conversation.item.added",
                "conversation.item.done",
                "response.created",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_audio_transcript.delta",
                "response.output_audio.done",
                "response.output_audio_transcript.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.done",
                "rate_limits.updated",
                "output_audio_buffer.stopped",
            ],
        )
        # Playback starts once the audio part exists; a short reply may finish generating first.
        assert in_order(
            types_after(client, mark),
            ["response.content_part.added", "output_audio_buffer.started", "output_audio_buffer.stopped"],
        )
        assert not client.of_type("response.output_text.delta", after=mark)
        assert all(e["event_id"].startswith("event_") for e in client.events)
        await client.hangup()


async def test_text_only_session_answers_in_text_without_audio(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect(session={**BRIEF, "output_modalities": ["text"]}) == 201
        assert client.of_type("session.updated")[-1]["session"]["output_modalities"] == ["text"]
        asked_at = time.monotonic()
        mark = client.ask("Name a color.")
        done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
        assert done["status"] == "completed" and done["output_modalities"] == ["text"]
        text = done["output"][0]["content"][0]
        assert text["type"] == "output_text" and text["text"].strip()
        deltas = "".join(e["delta"] for e in client.of_type("response.output_text.delta", after=mark))
        assert deltas.strip() == text["text"].strip()
        await asyncio.sleep(0.5)  # any reply audio would be on the track by now
        for name in (
            "output_audio_buffer.started",
            "response.output_audio_transcript.delta",
            "response.output_audio.done",
        ):
            assert not client.of_type(name, after=mark), name
        assert voiced_seconds(client, asked_at) == 0, "a text-only answer must not be voiced"
        await client.hangup()


async def test_manual_turns_commit_and_answer_only_when_asked(models, speech, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url)
        manual = {**BRIEF, "audio": {"input": {"turn_detection": None}}}
        assert await client.connect(session=manual) == 201
        assert client.of_type("session.updated")[-1]["session"]["audio"]["input"]["turn_detection"] is None
        client.send({"type": "input_audio_buffer.clear"})  # what was heard before the question is not part of it
        await client.wait_for("input_audio_buffer.cleared", timeout=5)
        mark = len(client.events)
        client.say(speech(QUESTION))
        assert await wait_until(lambda: client.mic.finished_at is not None, 15)
        await asyncio.sleep(1.2)  # longer than the server VAD silence: a VAD turn would have ended
        assert not [
            t for t in types_after(client, mark) if t.startswith(("input_audio_buffer.", "response.", "conversation."))
        ]

        client.send({"type": "input_audio_buffer.commit", "event_id": "evt_commit"})
        committed = await client.wait_for("input_audio_buffer.committed", timeout=10, after=mark)
        completed = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout=30, after=mark
        )
        assert completed["item_id"] == committed["item_id"]
        assert says(completed["transcript"], QUESTION), completed["transcript"]
        await asyncio.sleep(0.5)
        assert not client.of_type("response.created", after=mark), "manual turns: no response until response.create"

        client.send({"type": "response.create"})
        done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
        assert done["status"] == "completed" and done["output"][0]["content"][0]["transcript"].strip()
        await client.wait_for("output_audio_buffer.started", timeout=20, after=mark)
        await client.hangup()


async def test_cancel_mid_answer_stops_the_audio(models, gateway_config):
    async with serve(gateway_config(max_response_tokens=160), models) as (url, _app):
        client = RealtimeClient(url)
        story = {"type": "realtime", "instructions": "You are a storyteller. Tell long, detailed stories."}
        assert await client.connect(session=story) == 201
        mark = client.ask("Tell me a long story about a brave knight and a dragon.")
        started = await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        await asyncio.sleep(0.6)  # mid-answer: the reply is being heard and still being generated
        client.send({"type": "response.cancel", "event_id": "evt_cancel"})
        done = (await client.wait_for("response.done", timeout=10, after=mark))["response"]
        cleared = await client.wait_for("output_audio_buffer.cleared", timeout=10, after=mark)
        assert done["status"] == "cancelled" and done["status_details"]["reason"] == "client_cancelled"
        assert cleared["response_id"] == done["id"] == started["response_id"]
        assert not client.of_type("error", after=mark)

        cleared_at = client.time_of(cleared)
        assert voiced_seconds(client, client.time_of(started) - 0.2, cleared_at) >= 0.1, (
            "no reply was heard before the cancel"
        )
        # The conversation keeps what the caller heard: a beginning of what was said.
        said = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta", after=mark)).split()
        heard = done["output"][0]["content"][0]["transcript"].split()
        assert heard == said[: len(heard)], (heard, said)
        await asyncio.sleep(1.5)
        # Frames already on the wire may still land just after the event; nothing voiced after that.
        assert voiced_seconds(client, cleared_at + 0.3) == 0, "reply audio went on after the cancel"
        assert not [
            e for e in client.of_type("output_audio_buffer.stopped", after=mark) if e["response_id"] == done["id"]
        ]
        assert not client.of_type("response.output_audio_transcript.delta", after=client.events.index(cleared))
        await client.hangup()


async def test_malformed_messages_get_errors_and_the_call_goes_on(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect(session=BRIEF) == 201
        mark = len(client.events)
        client.send_raw('{"type": "response.create"')
        client.send({"type": "response.explode", "event_id": "evt_unknown"})
        client.send({"type": "conversation.item.retrieve", "item_id": 42, "event_id": "evt_types"})
        client.send_raw(
            json.dumps({"type": "session.update", "session": {"instructions": "x" * MAX_CLIENT_MESSAGE_BYTES}})
        )
        await client.wait_for("error", timeout=10, count=4, after=mark)
        errors = [e["error"] for e in client.of_type("error", after=mark)]
        assert [(e["type"], e["code"]) for e in errors] == [
            ("invalid_request_error", "invalid_json"),
            ("invalid_request_error", "invalid_value"),
            ("invalid_request_error", "invalid_type"),
            ("invalid_request_error", "message_too_large"),
        ]
        assert [e["event_id"] for e in errors] == [None, "evt_unknown", "evt_types", None]

        turn = client.ask("Say hello.", response={"output_modalities": ["text"]})
        done = (await client.wait_for("response.done", timeout=60, after=turn))["response"]
        assert done["status"] == "completed" and done["output"][0]["content"][0]["text"].strip()
        assert client.of_type("session.updated")[-1]["session"]["instructions"] == BRIEF["instructions"]
        await client.hangup()


async def test_idle_timeout_prompts_the_silent_caller_instead_of_hanging_up(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url)
        idle = {
            **BRIEF,
            "output_modalities": ["text"],
            "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}}},
        }
        assert await client.connect(session=idle) == 201
        armed_at = time.monotonic()
        triggered = await client.wait_for("input_audio_buffer.timeout_triggered", timeout=15)
        assert client.time_of(triggered) - armed_at >= 4.5  # not before the 5 s idle timeout
        assert 4000 <= triggered["audio_end_ms"] - triggered["audio_start_ms"] <= 6000
        after = client.events.index(triggered)
        committed = await client.wait_for("input_audio_buffer.committed", timeout=5, after=after)
        assert committed["item_id"] == triggered["item_id"]
        done = (await client.wait_for("response.done", timeout=60, after=after))["response"]
        assert done["status"] == "completed"
        assert not [e for e in client.of_type("error") if e["error"]["type"] == "session_closed"], (
            "the call was hung up"
        )
        await client.hangup()
