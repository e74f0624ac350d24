"""A caller who speaks on just as the reply to their first words is asked (the load generator's
"1 2 3" caller: "One." answered, "two, three" heard and never answered), over a real Realtime
WebSocket with the real models.

The unit cuts the reply at the next speech's start (``interrupt_response``), from the VAD thread;
the reply is asked on the event loop when the first words' transcript is handled. When the loop
handles that transcript only after the VAD thread has run the interrupt (a busy loop: both events
wait in its queue), nothing cut the reply, and the next turn's transcript found it active and
started no response. Here the crossing is made on purpose: the first transcript is held back
until the next speech start is sent (after the unit's interrupt ran), then both go in that order."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.pipeline import events as pe
from gateway.pool.unit import PipelineUnit
from tests.helpers import app_idle, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

pytestmark = pytest.mark.slow  # real model turns over a real WebSocket: ~15 s


def crossing_transcript_and_start(monkeypatch) -> None:
    """Hold each TranscriptionCompleted until the unit's next SpeechStarted (sent after its
    interrupt ran) or 3 s, then deliver both in that order: a loop busy between the two."""
    notify = PipelineUnit.notify
    held: list[tuple[PipelineUnit, pe.PipelineEvent]] = []

    def crossed(unit: PipelineUnit, event: pe.PipelineEvent) -> None:
        if isinstance(event, pe.TranscriptionCompleted):
            held.append((unit, event))
            unit._loop.call_soon_threadsafe(unit._loop.call_later, 3.0, release)
            return
        if isinstance(event, pe.SpeechStarted):
            release()
        notify(unit, event)

    def release() -> None:
        while held:
            notify(*held.pop(0))

    monkeypatch.setattr(PipelineUnit, "notify", crossed)


async def test_a_turn_spoken_as_the_reply_is_asked_is_answered(models, speech, gateway_config, monkeypatch):
    crossing_transcript_and_start(monkeypatch)
    pause = np.zeros(48000, np.int16)  # 1 s: the first turn ends and is transcribed before "two"
    audio = np.concatenate([speech("One."), pause, speech("Two, three.")])
    turn = {"type": "server_vad", "silence_duration_ms": 500}
    update = {"type": "realtime", "audio": {"input": {"turn_detection": turn}}}
    long = "Always answer with at least four full sentences."  # the first reply still going at the next turn
    async with serve(gateway_config(instructions=long, max_response_tokens=60), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", session=update)
            await client.stream(audio, silence_s=1.5, pace=1.0)
            last = await client.wait_for(TRANSCRIBED, count=2, timeout=30)
            assert "three" in last["transcript"].lower() or "3" in last["transcript"], last
            after = client.events.index(last)
            first = client.of_type("response.created")[0]["response"]["id"]
            # the last turn answered: a response created after its transcript, and played
            try:
                answer = await client.wait_for("response.created", timeout=30, after=after)
            except TimeoutError:
                raise AssertionError(f"the last turn was never answered: {_log(client)}") from None
            done = await client.wait_for("response.done", timeout=60, after=client.events.index(answer))
            assert done["response"]["id"] == answer["response"]["id"], done
            assert done["response"]["status"] in ("completed", "incomplete"), done
            cut = [e["response"] for e in client.of_type("response.done") if e["response"]["id"] == first]
            assert cut and cut[0]["status"] == "cancelled", _log(client)  # the reply to "One." alone gave way
            assert cut[0]["status_details"]["reason"] == "turn_detected"
        assert await wait_until(lambda: app_idle(app), 10)


TRANSCRIBED = "conversation.item.input_audio_transcription.completed"


def _log(client: EventClient) -> list[str]:
    """The turn and response events so far, for a failure's message: seconds, type, words or status."""
    t0, kept = client.event_times[0], ("speech_started", "committed", TRANSCRIBED, "response.created", "response.done")
    return [
        f"{client.event_times[i] - t0:.2f} {e['type']} {e.get('transcript') or e.get('response', {}).get('status', '')}"
        for i, e in enumerate(client.events)
        if e["type"] in [f"input_audio_buffer.{k}" for k in kept[:2]] + list(kept[2:])
    ]
