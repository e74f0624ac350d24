"""The preemptive reply in a spoken call over the Realtime WebSocket on the real models: the reply
started from the speculative transcript at the caller's pause plays when the turn ends with those
words, its LLM first token before the turn was even decided; a caller who goes on after the pause
gets no trace of the reply started there (no event, no audio; the conversation holds only the real
reply to the whole turn, itself the one started at the turn's last pause). The turn ends after a
long silence (``server_vad``, 2.5 s), so that the held reply has its first token on the slowest
box; the client events are the same, in the same order, as without it."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.server.app import POOL
from tests.helpers import app_idle, says, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

QUESTION = "Please tell me one fun fact about dolphins."
FIRST_PART = "Please tell me one fun fact"
SECOND_PART = "about the moon and its craters."
SLOW_END = {"type": "server_vad", "silence_duration_ms": 2500}
# The order of the turn's events with or without a preemptive reply (each type's first occurrence).
TURN_ORDER = (
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.input_audio_transcription.completed",
    "response.created",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_audio_transcript.delta",
    "response.output_audio.delta",
    "response.done",
)


async def spoken_turn(url: str, samples: np.ndarray) -> EventClient:
    async with EventClient(url, query="?model=gpt-realtime&gateway_events=gateway.latency") as client:
        await client.wait_for("session.created", timeout=10)
        await client.send(
            "session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": SLOW_END}}}
        )
        await client.wait_for("session.updated", timeout=10)
        await client.stream(samples, silence_s=3.2)
        await client.wait_for("response.done", timeout=120)
        await client.wait_for("gateway.latency", timeout=30)
    return client


def check_one_truthful_turn(client: EventClient) -> dict:
    """One turn, one response, its events in the usual order, every response event of that one
    response; returns its ``response.done`` response."""
    types = [e["type"] for e in client.events]
    assert not client.of_type("error"), client.of_type("error")
    assert types.count("conversation.item.input_audio_transcription.completed") == 1, "one turn, reported once"
    assert types.count("response.created") == 1, "one response: nothing of another one"
    firsts = [types.index(name) for name in TURN_ORDER]
    assert firsts == sorted(firsts), [types[i] for i in sorted(firsts)]
    response = client.of_type("response.done")[0]["response"]
    for event in client.events:
        if event["type"].startswith("response.") and "response_id" in event:
            assert event["response_id"] == response["id"], event
    said = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta"))
    assert said.strip() == response["output"][0]["content"][0]["transcript"], "the audio said is the reply's"
    assert len(said.split()) >= 3, said
    return response


async def test_the_reply_started_at_the_pause_plays_when_the_turn_ends_with_those_words(models, speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=24), models) as (url, app):
        client = await spoken_turn(url, speech(QUESTION))
        counts = app[POOL].units[0].preemptive.counts()
        assert await wait_until(lambda: app_idle(app), 10)
    heard = client.of_type("conversation.item.input_audio_transcription.completed")[0]["transcript"]
    assert says(heard, QUESTION), heard
    check_one_truthful_turn(client)
    assert counts == {"used": 1, "discarded": 0, "skipped": 0}, counts
    latency = client.of_type("gateway.latency")[0]["latency_ms"]
    # Its first token came while the end of the turn was still being decided (before it was asked).
    assert latency["llm_first_token"] < 0, latency


@pytest.mark.slow  # two speculative replies and a long turn
async def test_a_caller_who_goes_on_after_the_pause_gets_no_trace_of_the_reply_started_there(
    models, speech, gateway_config
):
    pause = np.zeros(int(48000 * 1.8), np.int16)  # a pause inside the turn (it ends after 2.5 s)
    samples = np.concatenate([speech(FIRST_PART), pause, speech(SECOND_PART)])
    async with serve(gateway_config(max_response_tokens=24), models) as (url, app):
        client = await spoken_turn(url, samples)
        replies = app[POOL].units[0].preemptive
        counts, discarded = replies.counts(), replies.last_discarded
        assert await wait_until(lambda: app_idle(app), 10)
    heard = client.of_type("conversation.item.input_audio_transcription.completed")[0]["transcript"]
    assert says(heard, FIRST_PART + " " + SECOND_PART), heard
    check_one_truthful_turn(client)
    # The reply started at the first pause was discarded; the one started at the turn's last pause,
    # from the whole turn's words, was used.
    assert counts == {"used": 1, "discarded": 1, "skipped": 0}, counts
    assert discarded is not None and discarded.latency.llm_first_token is not None, "it had started to answer"
    draft = discarded.request[0][-1].content
    assert says(draft, FIRST_PART) and not says(draft, SECOND_PART), draft


@pytest.mark.slow  # two spoken turns with a long end
async def test_a_session_turns_the_preemptive_reply_off_and_on_for_its_call(models, speech, gateway_config):
    """The gateway extension ``"preemptive_reply"`` of a ``session.update`` reaches the call's unit:
    off, the turn is answered with no reply started at the pause; on again, the next one is used."""
    config = gateway_config(max_response_tokens=24)
    assert config.preemptive_reply, "the operator's default is on: the session turns it off"
    async with serve(config, models) as (url, app):
        replies = app[POOL].units[0].preemptive
        async with EventClient(url, query="?model=gpt-realtime") as client:
            await client.wait_for("session.created", timeout=10)
            off = {"type": "realtime", "audio": {"input": {"turn_detection": SLOW_END}}, "preemptive_reply": False}
            await client.send("session.update", session=off)
            updated = await client.wait_for("session.updated", timeout=10)
            assert "preemptive_reply" not in updated["session"], "OpenAI's shape: the extension is not echoed"
            await client.stream(speech(QUESTION), silence_s=3.2)
            await client.wait_for("response.done", timeout=120)
            counts_off = replies.counts()
            mark = len(client.events)
            await client.send("session.update", session={"type": "realtime", "preemptive_reply": True})
            await client.wait_for("session.updated", timeout=10, after=mark)
            await client.stream(speech(QUESTION), silence_s=3.2)
            await client.wait_for("response.done", timeout=120, after=mark)
            counts_on = replies.counts()
        assert await wait_until(lambda: app_idle(app), 10)
    assert not client.of_type("error"), client.of_type("error")
    assert len(client.of_type("response.done")) == 2, "both turns answered"
    assert counts_off == {"used": 0, "discarded": 0, "skipped": 0}, counts_off
    assert counts_on == {"used": 1, "discarded": 0, "skipped": 0}, counts_on
