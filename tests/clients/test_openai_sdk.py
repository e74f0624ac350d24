"""The official OpenAI Python SDK (``openai``), unchanged, pointed at the gateway by URL:
over its WebSocket transport (``client.realtime.connect``) a spoken turn and a typed one; a WebRTC
call opened with ``client.realtime.calls.create`` and steered by a sideband ``connect(call_id=...)``."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest
from openai import AsyncOpenAI

from gateway.media.resample import Resampler
from tests.helpers import QUESTION, app_idle, says, serve, wait_until

API_KEY = "sk-openai-sdk-test"


def sdk_client(url: str) -> AsyncOpenAI:
    """The SDK as a user points it at the gateway: its base URL and its WebSocket base URL."""
    return AsyncOpenAI(
        base_url=f"{url}/v1", websocket_base_url=url.replace("http://", "ws://") + "/v1", api_key=API_KEY
    )


def pcm16_24k(samples_48k: np.ndarray) -> bytes:
    resampler = Resampler(24000)
    return np.concatenate([resampler.resample_array(samples_48k, 48000), resampler.flush()]).astype("<i2").tobytes()


async def collect_until_done(connection, events: list) -> None:
    async for event in connection:
        events.append(event)
        if event.type == "response.done":
            return


async def test_openai_sdk_spoken_turn_over_websocket(models, speech, gateway_config):
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=24), models) as (url, app):
        async with sdk_client(url).realtime.connect(model="gpt-realtime") as connection:
            await connection.session.update(
                session={
                    "type": "realtime",
                    "output_modalities": ["audio"],
                    "audio": {
                        "input": {
                            "format": {"type": "audio/pcm", "rate": 24000},
                            "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
                        },
                        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"},
                    },
                }
            )
            audio = pcm16_24k(speech(QUESTION)) + bytes(2 * 24000 * 6 // 5)  # + 1.2 s silence
            events: list = []
            reader = asyncio.ensure_future(collect_until_done(connection, events))
            chunk = 2 * 2400  # 100 ms of 24 kHz 16-bit audio, as a microphone client sends it
            for start in range(0, len(audio), chunk):
                await connection.input_audio_buffer.append(
                    audio=base64.b64encode(audio[start : start + chunk]).decode()
                )
                await asyncio.sleep(0.05)  # twice real time
            await asyncio.wait_for(reader, 90)
        types = [event.type for event in events]
        assert types[0] == "session.created" and "session.updated" in types
        assert "input_audio_buffer.speech_started" in types and "input_audio_buffer.committed" in types
        user = [e for e in events if e.type == "conversation.item.input_audio_transcription.completed"][-1].transcript
        assert says(user, QUESTION), user
        reply = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
        samples = np.frombuffer(reply, "<i2")
        assert samples.size >= 24000 * 0.5 and np.abs(samples).max() > 2000  # at least half a second of speech
        transcript = [e for e in events if e.type == "response.output_audio_transcript.done"][-1].transcript
        assert transcript.strip()
        done = events[-1]
        assert done.response.status == "completed" and done.response.output[0].content[0].transcript == transcript
        assert not [e for e in events if e.type == "error"]
        assert await wait_until(lambda: app_idle(app), 10)


async def test_openai_sdk_text_turn_over_websocket(models, gateway_config):
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=16), models) as (url, app):
        async with sdk_client(url).realtime.connect(model="gpt-realtime") as connection:
            await connection.session.update(
                session={"type": "realtime", "output_modalities": ["text"], "instructions": "Answer in a few words."}
            )
            await connection.conversation.item.create(
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}
            )
            await connection.response.create(response={"metadata": {"turn": "greeting"}})
            events: list = []
            await asyncio.wait_for(collect_until_done(connection, events), 60)
            created = next(e for e in events if e.type == "response.created")
            assert created.response.metadata == {"turn": "greeting"}
            text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
            assert text.strip()
            done = events[-1]
            assert done.response.status == "completed" and done.response.output[0].content[0].text == text
            types = [e.type for e in events]
            for name in (
                "conversation.item.added",
                "conversation.item.done",
                "response.output_item.added",
                "response.output_item.done",
            ):
                assert name in types
            # conversation.item.retrieve is answered.
            await connection.conversation.item.retrieve(item_id=done.response.output[0].id)
            retrieved = await asyncio.wait_for(connection.recv(), 10)
            while retrieved.type != "conversation.item.retrieved":
                retrieved = await asyncio.wait_for(connection.recv(), 10)
            assert retrieved.item.id == done.response.output[0].id
        assert await wait_until(lambda: app_idle(app), 10)


async def test_openai_sdk_webrtc_call_then_sideband_on_it(models, gateway_config):
    """``realtime.calls.create`` (the SDK's multipart offer) opens a WebRTC call (aiortc holds the
    media); ``realtime.connect(call_id=...)`` attaches a sideband that steers it; ``calls.hangup``
    ends it."""
    from aiortc import RTCPeerConnection, RTCSessionDescription

    async with serve(gateway_config(api_key=API_KEY), models) as (url, app):
        pc = RTCPeerConnection()
        pc.addTransceiver("audio", direction="sendrecv")
        channel = pc.createDataChannel("oai-events")
        on_channel: list[dict] = []
        channel.on("message", lambda message: on_channel.append(json.loads(message)))
        await pc.setLocalDescription(await pc.createOffer())
        client = sdk_client(url)
        raw = await client.realtime.calls.with_raw_response.create(
            sdp=pc.localDescription.sdp, session={"type": "realtime", "instructions": "Be brief."}
        )
        assert raw.http_response.status_code == 201
        call_id = raw.headers["location"].rsplit("/", 1)[-1]
        await pc.setRemoteDescription(RTCSessionDescription(raw.http_response.text, "answer"))
        assert await wait_until(lambda: any(e["type"] == "session.created" for e in on_channel), 20)
        assert on_channel[0]["session"]["instructions"] == "Be brief."  # the session sent with the offer
        try:
            async with client.realtime.connect(call_id=call_id) as sideband:
                await sideband.session.update(session={"type": "realtime", "instructions": "Speak like a pirate."})
                event = await asyncio.wait_for(sideband.recv(), 10)
                while event.type != "session.updated":
                    event = await asyncio.wait_for(sideband.recv(), 10)
                assert event.session.instructions == "Speak like a pirate."
                assert await wait_until(lambda: any(e["type"] == "session.updated" for e in on_channel), 10)
            await client.realtime.calls.hangup(call_id)
            assert await wait_until(lambda: app_idle(app), 10)
        finally:
            await pc.close()


@pytest.mark.slow  # ~2 s: a gateway started for one socket
async def test_openai_sdk_beta_transcription_session_update(models, gateway_config):
    """The SDK's beta connection opened for transcription (``client.beta.realtime.connect`` with
    ``intent=transcription``) sets its session with ``connection.transcription_session.update``:
    refused before as an unknown event (``invalid_value``), the language never applied. Now the
    SDK reads ``transcription_session.updated`` into its own type, and the socket's close gives
    the unit back to the pool."""
    async with serve(gateway_config(api_key=API_KEY), models) as (url, app):
        connect = sdk_client(url).beta.realtime.connect
        async with connect(model="gpt-4o-transcribe", extra_query={"intent": "transcription"}) as connection:
            await connection.transcription_session.update(
                session={
                    "input_audio_format": "pcm16",
                    "input_audio_transcription": {"model": "gpt-4o-transcribe", "language": "fr"},
                    "turn_detection": {"type": "server_vad", "silence_duration_ms": 600},
                }
            )
            events: list = []
            async for event in connection:
                events.append(event)
                if event.type in ("transcription_session.updated", "error"):
                    break
        assert [e.type for e in events] == ["session.created", "transcription_session.updated"], events
        updated = events[-1]
        assert type(updated).__name__ == "TranscriptionSessionUpdatedEvent", type(updated)
        assert updated.session.input_audio_transcription.language == "fr", updated
        assert updated.session.turn_detection.silence_duration_ms == 600, updated
        assert await wait_until(lambda: app_idle(app), 10)
