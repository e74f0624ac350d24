"""A spoken turn over the Realtime WebSocket on the real models: the LLM reads the reply's prompt
from the transcript at the caller's pause, while the end of the turn is decided, so the turn reads
one token of it (``response.usage`` says how many input tokens were cached); with ``llm_read_ahead``
off it reads the caller's words itself. Both answer the question asked. The turn ends after a long
silence (``server_vad``, 2.5 s) so that the read is done on the slowest box: a read not done when
the turn ends is let go and the turn reads its prompt itself (tests/pool/test_leaks.py). The
preemptive reply, which reads the prompt as it generates, is off here (its own test:
``tests/e2e/test_preemptive_reply_call.py``)."""

from __future__ import annotations

import pytest

from gateway.server.app import CONFIG
from tests.helpers import app_idle, says, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

# Questions no other test asks: no earlier turn's KV cells hold their words.
WITHOUT = "Please tell me one fun fact about owls."
WITH = "Please tell me one fun fact about otters."


SLOW_END = {"type": "server_vad", "silence_duration_ms": 2500}


async def spoken_turn(url: str, samples) -> tuple[str, dict, list[str]]:
    async with EventClient(url) as client:
        await client.wait_for("session.created", timeout=10)
        await client.send(
            "session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": SLOW_END}}}
        )
        await client.wait_for("session.updated", timeout=10)
        await client.stream(samples, silence_s=3.2)
        done = await client.wait_for("response.done", timeout=120)
        heard = client.of_type("conversation.item.input_audio_transcription.completed")[-1]["transcript"]
        errors = client.of_type("error")
        types = [e["type"] for e in client.events]
    assert not errors, errors
    assert types.count("conversation.item.input_audio_transcription.completed") == 1, "one turn, reported once"
    return heard, done["response"], types


@pytest.mark.slow  # tens of seconds of model turns
async def test_a_turn_read_ahead_at_the_pause_reads_one_token_itself(models, speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=24, llm_read_ahead=False, preemptive_reply=False), models) as (
        url,
        app,
    ):
        assert app[CONFIG].llm_read_ahead is False
        heard, response, _ = await spoken_turn(url, speech(WITHOUT))
        assert says(heard, WITHOUT), heard
        usage = response["usage"]
        assert response["status"] in ("completed", "incomplete") and usage["input_tokens"] > 20, response
        cached = usage["input_token_details"]["cached_tokens"]
        assert cached < usage["input_tokens"] - 5, ("the caller's words are read in the turn", usage)
        assert await wait_until(lambda: app_idle(app), 10)

    async with serve(gateway_config(max_response_tokens=24, preemptive_reply=False), models) as (url, app):
        heard, response, types = await spoken_turn(url, speech(WITH))
        assert says(heard, WITH), heard
        usage = response["usage"]
        assert response["status"] in ("completed", "incomplete") and usage["input_tokens"] > 20, response
        cached = usage["input_token_details"]["cached_tokens"]
        assert cached == usage["input_tokens"] - 1, ("the prompt was read ahead at the pause", usage)
        assert usage["input_token_details"]["cached_tokens_details"]["text_tokens"] == cached
        assert len(response_words(response).split()) >= 3, response  # it answered in words
        # Nothing of the read ahead is sent: the transcript comes once, after the turn ends.
        assert types.index("input_audio_buffer.committed") < types.index(
            "conversation.item.input_audio_transcription.completed"
        )
        assert await wait_until(lambda: app_idle(app), 10)


def response_words(response: dict) -> str:
    parts = [part for item in response["output"] for part in item.get("content", [])]
    return " ".join(str(part.get("transcript") or part.get("text") or "") for part in parts).lower()
