"""The Realtime protocol over a WebSocket (``GET /v1/realtime``), on the real models:
the upgrade and its refusals, bad input, the watchdogs and shutdown, and turns with the audio in
the events (G.711 in and out, barge-in keeping the words the caller heard)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import numpy as np
import pytest

from gateway.media.audio_format import AudioFormat
from gateway.pool.unit import UnitState
from gateway.server.app import POOL
from tests.helpers import QUESTION, app_idle, says, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

PCMU = AudioFormat("pcmu", 8000)


async def refusal(url: str, **kwargs) -> aiohttp.WSServerHandshakeError:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with EventClient(url, **kwargs):
            pass
    return refused.value


async def test_session_created_first_model_mapped_and_realtime_subprotocol(models, gateway_config):
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url, protocols=("realtime", "openai-beta.realtime-v1")) as client:
            first = await client.wait_for("session.created", timeout=10)
            assert client.events[0] is first
            assert client.ws.protocol == "realtime"
            assert "modalities" in first["session"]  # the beta subprotocol: the beta (flat) shape
        assert await wait_until(lambda: app_idle(app), 10)  # (one unit: drained before the next session)
        async with EventClient(url, query="?model=gpt-realtime-mini") as client:
            session = (await client.wait_for("session.created", timeout=10))["session"]
            assert session["type"] == "realtime" and session["audio"]["output"]["format"]["type"] == "audio/pcm"
            assert session["model"] == models_llm(app)  # the model really used is shown
            # Unknown-but-valid session fields (tracing...) are accepted.
            await client.send(
                "session.update",
                session={
                    "type": "realtime",
                    "tracing": "auto",
                    "include": None,
                    "audio": {"input": {"format": {"type": "audio/pcmu"}}},
                },
            )
            updated = await client.wait_for("session.updated", timeout=10)
            assert updated["session"]["audio"]["input"]["format"] == {"type": "audio/pcmu"}
            assert not client.of_type("error")
        assert await wait_until(lambda: app_idle(app), 10)


async def test_a_session_updated_of_64_kib_of_tools_reaches_a_websocket_client_whole(models, gateway_config):
    """The WebSocket has no message size limit of the WebRTC data channel's kind (a peer's SDP
    ``a=max-message-size``: tests/transports/webrtc/test_offers_and_calls.py): the echo of a
    session with 58 KB of tools and 8,000 characters of instructions (67 KB) arrives whole."""
    tool = {"type": "function", "parameters": {"type": "object", "properties": {}}}
    tools = [{**tool, "name": f"tool_{n}", "description": "d" * 29_000} for n in range(2)]
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send(
                "session.update", session={"type": "realtime", "instructions": "i" * 8000, "tools": tools}
            )
            updated = await client.wait_for("session.updated", timeout=10)
    assert [t["description"] for t in updated["session"]["tools"]] == ["d" * 29_000] * 2
    assert not client.of_type("error")


def models_llm(app) -> str:
    from gateway.server.app import CONFIG

    return app[CONFIG].llm_model


async def test_refusals_come_before_the_upgrade_as_json(models, gateway_config):
    async with serve(gateway_config(api_key="sk-ws-test", retry_after_s=7), models) as (url, app):
        assert (await refusal(url)).status == 401
        assert (await refusal(url, headers={"Authorization": "Bearer wrong"})).status == 401
        async with aiohttp.ClientSession() as http, http.get(f"{url}/v1/realtime") as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == "websocket_required"
            async with http.post(
                f"{url}/v1/realtime/client_secrets", json={}, headers={"Authorization": "Bearer sk-ws-test"}
            ) as minted:
                key = (await minted.json())["value"]
        # The browser form: the key as a subprotocol (the server selects "realtime" only).
        async with EventClient(url, protocols=("realtime", f"openai-insecure-api-key.{key}")) as client:
            await client.wait_for("session.created", timeout=10)
            assert client.ws.protocol == "realtime"
            # Pool full (one unit): 503 with Retry-After before the upgrade, and the API key works.
            full = await refusal(url, headers={"Authorization": "Bearer sk-ws-test"})
            assert full.status == 503 and full.headers.get("Retry-After") == "7"
        assert await wait_until(lambda: app_idle(app), 10)
        # The ephemeral key was used up by its session.
        assert (await refusal(url, protocols=("realtime", f"openai-insecure-api-key.{key}"))).status == 401
        async with EventClient(url, headers={"Authorization": "Bearer sk-ws-test"}) as client:
            await client.wait_for("session.created", timeout=10)


async def test_bad_input_gets_an_error_naming_it_and_the_session_goes_on(models, gateway_config):
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            cases = [
                ("not json", "invalid_json"),
                (b"\x00\x01binary", "invalid_event"),
                (
                    '{"type": "input_audio_buffer.append", "audio": "' + "A" * (8 * 1024 * 1024) + '"}',
                    "message_too_large",
                ),
                ('{"type": "input_audio_buffer.append", "audio": "not base64!"}', "invalid_value"),
                ('{"type": "input_audio_buffer.append", "audio": "AAEC"}', "invalid_value"),  # 3 bytes of pcm16
                ('{"type": "input_audio_buffer.append", "audio": "UklGRiQIAABXQVZFZm10IBAAAAA="}', "invalid_value"),
                ('{"type": "input_audio_buffer.append"}', "missing_required_parameter"),
                ('{"type": "no.such.event"}', "invalid_value"),
            ]
            for raw, code in cases:
                mark = len(client.events)
                await client.send_raw(raw)
                error = (await client.wait_for("error", after=mark, timeout=10))["error"]
                assert error["code"] == code, (raw[:40], error)
            messages = [e["error"]["message"] for e in client.of_type("error")]
            assert "Binary frames" in messages[1] and "limit" in messages[2]
            assert "16-bit" in messages[4] and "WAV" in messages[5]
            assert all(e["error"]["param"] == "audio" for e in client.of_type("error")[3:6])
            mark = len(client.events)
            await client.send("session.update", session={"instructions": "Still here."})
            assert (await client.wait_for("session.updated", after=mark, timeout=10))["session"][
                "instructions"
            ] == "Still here."
            unit = app[POOL].units[0]
            assert unit.state is UnitState.ACTIVE
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 10)
        assert unit.close_reason == "websocket_closed"
        # An abrupt close (the TCP connection dropped, no close frame): the unit is idle again too.
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        writer.write(
            b"GET /v1/realtime HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).startswith(b"HTTP/1.1 101")
        assert await wait_until(lambda: unit.state is UnitState.ACTIVE, 5)
        writer.transport.abort()
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 10)
        assert unit.close_reason == "websocket_closed"


async def test_idle_timeout_ends_the_session_with_its_reason(models, gateway_config):
    async with serve(gateway_config(idle_timeout_s=1.0), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await asyncio.wait_for(client.closed.wait(), 10)
            assert client.error_codes() == ["idle_timeout"]
        assert await wait_until(lambda: app_idle(app), 10)


async def test_shutdown_tells_the_client_and_does_not_wait_for_it(models, gateway_config):
    client = None
    started = time.monotonic()
    async with serve(gateway_config(), models) as (url, _):
        client = EventClient(url)
        await client.__aenter__()
        await client.wait_for("session.created", timeout=10)
    assert time.monotonic() - started < 15  # not aiohttp's 60 s wait for a handler that never returns
    await asyncio.wait_for(client.closed.wait(), 5)
    assert client.error_codes() == ["server_shutdown"]
    await client.close()


async def test_a_spoken_turn_in_g711_and_no_webrtc_only_events(models, speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=24), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send(
                "session.update",
                session={
                    "type": "realtime",
                    "audio": {
                        "input": {"format": {"type": "audio/pcmu"}},
                        "output": {"format": {"type": "audio/pcmu"}},
                    },
                },
            )
            await client.wait_for("session.updated", timeout=10)
            await client.stream(speech(QUESTION), PCMU, silence_s=1.2)
            done = await client.wait_for("response.done", timeout=90)
            user = client.of_type("conversation.item.input_audio_transcription.completed")[-1]["transcript"]
            assert says(user, QUESTION), user  # heard through G.711 at 8 kHz
            assert done["response"]["status"] == "completed"
            # The response says its audio format (a WebSocket client sizes the deltas with it).
            assert done["response"]["audio"]["output"]["format"] == {"type": "audio/pcmu"}
            reply = client.audio(PCMU)
            assert reply.size >= 8000 * 0.5 and np.abs(reply).max() > 2000  # half a second of speech, 8 kHz
            types = [e["type"] for e in client.events]
            assert not [t for t in types if t.startswith("output_audio_buffer.")]  # WebRTC only
            # All of the reply's audio comes before its response.done.
            assert max(i for i, t in enumerate(types) if t == "response.output_audio.delta") < types.index(
                "response.done"
            )
            assert types.index("input_audio_buffer.speech_started") < types.index("input_audio_buffer.committed")
        assert await wait_until(lambda: app_idle(app), 10)


async def test_barge_in_keeps_the_words_the_caller_heard(models, speech, gateway_config):
    config = gateway_config(max_response_tokens=90)
    async with serve(config, models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            # Barge-in at once (no pause to judge the words): what was read ahead but not heard is
            # what this test is about, and a ~600 ms pause would let the client play all of it.
            turn = {"type": "server_vad", "min_interruption_words": 0}
            await client.send(
                "session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turn}}}
            )
            await client.wait_for("session.updated", timeout=10)
            mark = await client.ask("Tell me a long story about a brave little dragon who learns to fly.")
            first = await client.wait_for("response.output_audio.delta", after=mark, timeout=90)
            started = client.event_times[client.events.index(first)]
            # The caller listens to the first words of the reply (a microphone streams the silence
            # too), then talks over it once two clauses are queued: with only the first one out
            # (a slow LLM), all of it could be heard and nothing read ahead (heard == generated).
            await client.wait_for("response.output_audio_transcript.delta", after=mark, timeout=90, count=2)
            await client.stream(np.zeros(48000 * 2 // 10, np.int16))
            interrupted_at = time.monotonic()
            await client.stream(speech("Wait, stop."), silence_s=1.0)
            done = await client.wait_for("response.done", after=mark, timeout=30)
            assert done["response"]["status"] == "cancelled"
            heard = done["response"]["output"][0]["content"][0]["transcript"]
            generated = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta", mark))
            sent_s = client.audio(response_id=done["response"]["id"]).size / 24000
            listened_s = interrupted_at - started
            # Audio went out at most the lead (0.4 s) ahead of real time, until the barge-in was
            # confirmed (the VAD needs the first ~0.3 s of the speech).
            assert sent_s <= listened_s + 1.5
            assert 0 < len(heard.split()) < len(generated.split()), (heard, generated)
            # The client may have played all it got: truncating there is no error.
            item_id = done["response"]["output"][0]["id"]
            mark = len(client.events)
            await client.send(
                "conversation.item.truncate", item_id=item_id, content_index=0, audio_end_ms=int(sent_s * 1000) - 10
            )
            await client.wait_for("conversation.item.truncated", after=mark, timeout=10)
            await client.send("conversation.item.retrieve", item_id=item_id)
            retrieved = await client.wait_for("conversation.item.retrieved", after=mark, timeout=10)
            assert retrieved["item"]["content"][0]["transcript"] == heard
            assert not client.of_type("error", mark)
        assert await wait_until(lambda: app_idle(app), 10)
