"""A client's own out-of-band response (``response.create`` with ``conversation: "none"``) while the
caller speaks, over a real Realtime WebSocket with the real models.

OpenAI's ``turn_detection.interrupt_response``: a VAD start interrupts "any ongoing response with
output to the default conversation (i.e. ``conversation`` of ``auto``)" (checked in the API
reference's ServerVad object through the ``search`` tool, docs corpus). An out-of-band response
(a classification, a summary the client asked for) is not one: the caller's turn, its start or its
words, never cuts it, and the turn is still answered, in the default conversation, once it is done.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import app_idle, serve, wait_until
from tests.realtime.harness import (
    Harness,
    client,
    committed,
    finished,
    speech_started,
    speech_stopped,
    transcribed,
)
from tests.transports.websocket.ws_client import EventClient

TRANSCRIBED = "conversation.item.input_audio_transcription.completed"
QUESTION = "What is the capital of France?"
# Long enough to still be generating when the caller's turn is transcribed (the test's point).
OUT_OF_BAND = {
    "conversation": "none",
    "output_modalities": ["text"],
    "instructions": "Count from one to forty in words, separated by commas.",
    "max_output_tokens": 120,
    "metadata": {"purpose": "side-task"},
}


def test_a_turn_answers_after_an_out_of_band_response_and_cuts_an_in_band_one_by_interrupt_response() -> None:
    """The session's side (a pipeline double): the caller's turn of words, transcribed while the
    client's out-of-band response runs, did not cut it (right) and was never answered (the session
    started nothing while a response was active, and nothing after it). Now it is answered once
    that response is done, and the unit is told that the caller's speech does not cut that one
    (``turn_cuts``). An in-band response the client asked during the speech is the turn's to cut
    under ``interrupt_response`` (as a reply of the server's is), and kept without it."""
    side = Harness()
    side.run(speech_started(0))
    side.run(client("response.create", response=OUT_OF_BAND))
    asked = side.last("response.created")["response"]["id"]
    for step in [speech_stopped(1500), committed(1500), transcribed(QUESTION)]:
        side.run(step)
    active = side.rt.responses.active()
    assert active is not None and active.id == asked and len(side.pipeline.requests) == 1
    side.run(finished(text="One, two, three.", audio=False))
    done = side.last("response.done")["response"]
    assert (done["id"], done["status"]) == (asked, "completed")
    assert len(side.pipeline.requests) == 2, "the turn is answered after the out-of-band response"
    assert side.pipeline.requests[1][0][-1].content == QUESTION
    assert side.pipeline.turn_cuts == [False, True]
    assert side.last("response.created")["response"]["conversation_id"] is not None

    for interrupt_response, cut in ((True, True), (False, False)):
        h = Harness()
        turn = {"type": "server_vad", "interrupt_response": interrupt_response}
        h.run(client("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turn}}}))
        h.run(speech_started(0))
        h.run(client("response.create", response={"output_modalities": ["text"]}))
        asked = h.last("response.created")["response"]["id"]
        for step in [speech_stopped(1500), committed(1500), transcribed(QUESTION)]:
            h.run(step)
        cancelled = [e["response"] for e in h.sent if e["type"] == "response.done" and e["response"]["id"] == asked]
        assert bool(cancelled) is cut, interrupt_response
        if cut:
            assert cancelled[0]["status_details"]["reason"] == "turn_detected"
            assert len(h.pipeline.requests) == 2, "and the turn is answered"
        assert h.pipeline.turn_cuts[0] is True


@pytest.mark.slow  # real model turns over a real WebSocket: ~20 s each
@pytest.mark.parametrize("sent", ["before_speech", "during_speech"])
async def test_the_callers_turn_never_cuts_an_out_of_band_response_and_is_answered(
    sent, models, speech, gateway_config
):
    turn = {"type": "server_vad", "silence_duration_ms": 500, "interrupt_response": True}
    update = {"type": "realtime", "audio": {"input": {"turn_detection": turn}}}
    async with serve(gateway_config(max_response_tokens=40), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", session=update)
            await client.wait_for("session.updated", timeout=10)
            if sent == "before_speech":
                await client.send("response.create", response=OUT_OF_BAND)
                await client.wait_for("response.created", timeout=10)
            talking = asyncio.ensure_future(client.stream(speech(QUESTION), silence_s=2.0, pace=1.0))
            try:
                if sent == "during_speech":
                    await client.wait_for("input_audio_buffer.speech_started", timeout=15)
                    await client.send("response.create", response=OUT_OF_BAND)
                    await client.wait_for("response.created", timeout=10)
                side = client.of_type("response.created")[0]["response"]
                assert side["conversation_id"] is None, side  # out of band
                side_done = await client.wait_for("response.done", timeout=60)
                heard = await client.wait_for(TRANSCRIBED, timeout=30)
            finally:
                await talking
            assert side_done["response"]["id"] == side["id"]
            # not cut: it ran to its end (or to its token cap)
            assert side_done["response"]["status"] in ("completed", "incomplete"), (side_done["response"], _log(client))
            assert "one" in _text(side_done["response"]).lower(), side_done["response"]
            # the caller's turn is answered all the same, in the default conversation

            def in_band() -> list[dict]:
                return [e for e in client.of_type("response.created") if e["response"]["conversation_id"] is not None]

            assert await wait_until(lambda: bool(in_band()), 30), f"the turn was never answered: {_log(client)}"
            answer = in_band()[0]
            assert client.events.index(answer) > client.events.index(heard)
            done = await client.wait_for("response.done", timeout=60, after=client.events.index(answer))
            assert done["response"]["id"] == answer["response"]["id"], done
            assert done["response"]["status"] in ("completed", "incomplete"), (done, _log(client))
        assert await wait_until(lambda: app_idle(app), 10)


def _text(response: dict) -> str:
    """The words of a finished response's output (text parts)."""
    return " ".join(
        part.get("text", "") or part.get("transcript", "")
        for item in response.get("output", [])
        for part in item.get("content", [])
    )


def _log(client: EventClient) -> list[str]:
    """The turn and response events so far, for a failure's message: seconds, type, words or status."""
    t0 = client.event_times[0]
    kept = ("input_audio_buffer.speech_started", "input_audio_buffer.committed", TRANSCRIBED)
    return [
        f"{client.event_times[i] - t0:.2f} {e['type']} {e.get('transcript') or e.get('response', {}).get('status', '')}"
        f" {e.get('response', {}).get('status_details') or ''}"
        for i, e in enumerate(client.events)
        if e["type"] in kept or e["type"] in ("response.created", "response.done")
    ]
