"""``input_audio_buffer.commit`` under server VAD, over a real WebSocket, on the real models.

OpenAI Realtime (client event ``input_audio_buffer.commit``): "commit the user input audio buffer,
which will create a new user message item"; with server VAD "the client does not need to send this
event", but may. A commit of less than 100 ms is refused, ``invalid_request_error`` code
``input_audio_buffer_commit_empty``, "Error committing input audio buffer: buffer too small.
Expected at least 100ms of audio, but buffer only has 50.00ms of audio." (0.00ms for an empty
buffer), its ``event_id`` echoed, the session going on; the 100 ms count the audio appended since
the last commit.

On main the VAD stage committed what it held for its own turn: with no turn started (speech the
VAD did not hear as speech, or under ~100 ms of it) that was the last part of one 32 ms chunk,
so a push-to-talk client's commit of a soft-spoken question was transcribed as nothing; a 50 ms
commit was accepted and an empty one answered "the buffer is empty".
"""

from __future__ import annotations

import asyncio
import base64

import numpy as np
import pytest

from tests.helpers import QUESTION, says, serve, server_errors
from tests.transports.websocket.ws_client import EventClient

TOO_SMALL = (
    "Error committing input audio buffer: buffer too small. "
    "Expected at least 100ms of audio, but buffer only has {}ms of audio."
)
# A soft voice (-61 dBFS peaks): Silero VAD gives it at most ~0.3 (no turn starts at the 0.5
# threshold), Whisper still hears every word. A low-gain microphone whose user presses "send".
SOFT = 0.001


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(48000 * seconds), np.int16)


async def append_ms(client: EventClient, samples_48k: np.ndarray, ms: int) -> None:
    """Append exactly ``ms`` of ``samples_48k`` as PCM16 24 kHz (every other sample)."""
    samples = np.ascontiguousarray(samples_48k[::2][: 24 * ms], "<i2")
    assert samples.size == 24 * ms
    await client.send("input_audio_buffer.append", audio=base64.b64encode(samples.tobytes()).decode())


async def commit_refused(client: EventClient, event_id: str) -> dict:
    before = len(client.events)
    await client.send("input_audio_buffer.commit", event_id=event_id)
    error = await client.wait_for("error", timeout=10, after=before)
    return dict(error["error"])


async def test_a_commit_of_nothing_or_under_100_ms_is_refused_as_openai_does(models, speech, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url, query="?intent=transcription") as client:
            await client.wait_for("session.created", timeout=10)
            empty = await commit_refused(client, "commit_empty")
            assert (empty["type"], empty["code"], empty["event_id"]) == (
                "invalid_request_error",
                "input_audio_buffer_commit_empty",
                "commit_empty",
            )
            assert empty["message"] == TOO_SMALL.format("0.00"), empty
            await append_ms(client, speech(QUESTION), 50)
            short = await commit_refused(client, "commit_short")
            assert (short["code"], short["event_id"]) == ("input_audio_buffer_commit_empty", "commit_short")
            assert short["message"] == TOO_SMALL.format("50.00"), short
            await client.send("session.update", session={"type": "transcription"})
            await client.wait_for("session.updated", timeout=10)  # the session goes on
            assert not client.of_type("input_audio_buffer.committed")
            assert not server_errors(client.events)


@pytest.mark.slow  # real STT turns
async def test_a_commit_takes_all_the_audio_appended_since_the_last_one(models, speech, gateway_config):
    """A question the VAD did not hear as speech (a soft voice), after a second of silence, is
    committed whole and transcribed as said; a 50 ms commit is refused and its audio counts for the
    next; a question the VAD is in the middle of is committed once, not again when the silence
    after it ends the VAD's turn."""
    question = speech(QUESTION)
    soft = (question * SOFT).astype(np.int16)
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url, query="?intent=transcription") as client:
            await client.wait_for("session.created", timeout=10)
            await client.stream(np.concatenate([silence(1.0), soft]), pace=100)
            await client.send("input_audio_buffer.commit", event_id="commit_soft")
            heard = await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=60)
            assert says(heard["transcript"], QUESTION), heard
            assert not client.of_type("input_audio_buffer.speech_started")  # the VAD heard no turn

            await append_ms(client, silence(0.05), 50)
            assert (await commit_refused(client, "commit_50"))["message"] == TOO_SMALL.format("50.00")
            await append_ms(client, silence(0.05), 50)
            await client.send("input_audio_buffer.commit", event_id="commit_100")
            await client.wait_for("input_audio_buffer.committed", timeout=10, count=2)
            await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=60, count=2)

            # The VAD's turn begins (it ends after 500 ms of silence), the client ends it first.
            vad = {"type": "transcription", "audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
            await client.send("session.update", session=vad)
            await client.stream(question, pace=100)
            await client.send("input_audio_buffer.commit", event_id="commit_loud")
            await client.stream(silence(1.5), pace=100)  # the silence that would have ended it
            third = await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=60, count=3)
            assert says(third["transcript"], QUESTION), third
            await asyncio.sleep(1.0)
            assert len(client.of_type("input_audio_buffer.speech_started")) == 1
            assert len(client.of_type("input_audio_buffer.committed")) == 3, [e["type"] for e in client.events]
            assert client.error_codes() == ["input_audio_buffer_commit_empty"]
            assert not server_errors(client.events)
