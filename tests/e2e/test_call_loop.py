"""A caller speaks over real WebRTC (aiortc on loopback) and hears a spoken answer."""

from __future__ import annotations

import asyncio

import aiohttp
import numpy as np

from gateway.client import RealtimeClient
from gateway.media.resample import Resampler
from gateway.pipeline.latency import DETAIL
from tests.helpers import QUESTION, app_idle, says, serve, similarity, wait_until


def to_16k_float(samples_48k: np.ndarray) -> np.ndarray:
    resampler = Resampler(16000)
    out = np.concatenate([resampler.resample_array(samples_48k, 48000), resampler.flush()])
    return out.astype(np.float32) / 32768.0


async def one_turn(client: RealtimeClient, audio: np.ndarray, timeout: float = 90.0) -> dict:
    start = len(client.events)
    client.say(audio)
    await client.wait_for("response.done", timeout=timeout, after=start)
    return await client.wait_for("output_audio_buffer.stopped", timeout=30, after=start)


async def test_spoken_question_gets_spoken_answer(models, speech, gateway_config):
    async with serve(gateway_config(pool_size=1, preemptive_reply=False), models) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        await one_turn(client, speech(QUESTION))

        user = client.of_type("conversation.item.input_audio_transcription.completed")[-1]["transcript"]
        assert says(user, QUESTION), user

        done = client.of_type("response.done")[-1]
        assert done["response"]["status"] == "completed"
        said = client.of_type("response.output_audio_transcript.done")[-1]["transcript"]
        assert said.strip()

        started = client.time_of(client.of_type("output_audio_buffer.started")[-1])
        reply = client.heard.samples(since=started - 0.5)
        voiced = client.heard.voiced_times()
        assert len([t for t in voiced if t >= started - 0.5]) * 0.02 >= 0.5, "less than 0.5 s of reply audio"
        assert np.abs(reply).max() > 2000

        heard_text = models.stt.transcribe(to_16k_float(reply))
        assert similarity(heard_text, said) >= 0.6, (heard_text, said)

        measured = client.of_type("gateway.latency")[-1]
        latency, detail = measured["latency_ms"], measured["detail_ms"]
        assert latency["voice_to_voice"] and latency["voice_to_voice"] > 0
        # Where the turn's time went: every span measured (this engine computes here), none
        # negative, and together the turn's end to its first frame.
        # (with the preemptive reply a used turn's LLM starts before the turn ends: llm_queue < 0, so it is off here)
        assert all(detail[key] is not None and detail[key] >= 0 for key, _, _ in DETAIL), detail
        turn_end_to_frame = latency["voice_to_voice"] - latency["vad_end_of_turn"]
        assert abs(sum(detail.values()) - turn_end_to_frame) < 5.0, (detail, latency)
        await client.hangup()


async def test_order_of_turn_events(models, speech, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        await one_turn(client, speech("Tell me a joke about cats."))
        types = [e["type"] for e in client.events]
        order = [
            "session.created",
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "conversation.item.input_audio_transcription.completed",
            "response.created",
            "response.content_part.added",
            "response.output_audio_transcript.delta",
            "response.output_audio_transcript.done",
            "response.done",
            "output_audio_buffer.stopped",
        ]
        positions = [types.index(name) for name in order]
        assert positions == sorted(positions), list(zip(order, positions, strict=False))
        # Playback starts once the audio part exists (a short reply may finish generating first)
        # and is over only after it started.
        started = types.index("output_audio_buffer.started")
        assert types.index("response.content_part.added") < started < types.index("output_audio_buffer.stopped")
        assert all("event_id" in e for e in client.events)
        await client.hangup()


async def test_pcmu_caller_like_a_sip_bridge(models, speech, gateway_config):
    """A G.711 (PCMU, 8 kHz) leg, as a SIP-to-WebRTC bridge sends it, is understood too."""
    async with serve(gateway_config(), models) as (url, _app):
        client = RealtimeClient(url, codec="PCMU")
        assert await client.connect() == 201
        await one_turn(client, speech(QUESTION))
        user = client.of_type("conversation.item.input_audio_transcription.completed")[-1]["transcript"]
        assert says(user, QUESTION), user  # heard through G.711 at 8 kHz
        assert len(client.heard.voiced_times()) * 0.02 >= 0.5
        await client.hangup()


async def test_pool_full_is_refused_at_once_and_unit_returns_idle(models, gateway_config):
    async with serve(gateway_config(pool_size=1, retry_after_s=7), models) as (url, _app):
        first = RealtimeClient(url)
        assert await first.connect() == 201
        second = RealtimeClient(url)
        status = await asyncio.wait_for(second.connect(), timeout=5)
        assert status == 503
        assert second.retry_after == "7"
        assert '"pool_full"' in second.error_body
        await second.close()

        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/v1/pool") as response:
                pool = await response.json()
            assert pool["size"] == 1 and pool["in_use"] == 1
            assert pool["units"][0]["state"] == "active"
            await first.close()  # close without hang-up: the peer connection going away ends the call

            async def idle() -> bool:
                async with http.get(f"{url}/v1/pool") as response:
                    return (await response.json())["units"][0]["state"] == "idle"

            for _ in range(100):
                if await idle():
                    break
                await asyncio.sleep(0.1)
            assert await idle()

        third = RealtimeClient(url)
        assert await third.connect() == 201
        await third.hangup()


async def test_offer_json_health_and_demo_page(models, gateway_config):
    from aiortc import RTCPeerConnection

    async with serve(gateway_config(), models) as (url, app):
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/healthz") as response:
                assert response.status == 200
            async with http.get(f"{url}/") as response:
                assert response.status == 200
                assert "<html" in (await response.text()).lower()
            pc = RTCPeerConnection()
            pc.addTransceiver("audio")
            pc.createDataChannel("oai-events")
            await pc.setLocalDescription(await pc.createOffer())
            async with http.post(f"{url}/offer", json={"sdp": pc.localDescription.sdp, "type": "offer"}) as response:
                assert response.status == 200
                body = await response.json()
            assert body["type"] == "answer" and body["call_id"].startswith("rtc_")
            assert "m=audio" in body["sdp"]
            async with http.delete(f"{url}/v1/realtime/calls/{body['call_id']}") as response:
                assert response.status == 200
            await pc.close()
            # The hang-up answers as the drain starts; the one unit is free (not 503) once it ends.
            assert await wait_until(lambda: app_idle(app), 5)
            async with http.post(f"{url}/offer", json={"sdp": "v=0\r\nnonsense", "type": "offer"}) as response:
                assert response.status == 400
                assert (await response.json())["error"]["code"] == "invalid_offer"
            assert await wait_until(lambda: app_idle(app), 5)
