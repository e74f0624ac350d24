"""A real WebRTC call through a gateway whose STT and TTS are real OpenAI-compatible servers.

The caller's question goes to faster-whisper-server, the answer's audio comes from local-tts-studio
(tests/models/speech_servers.py), the LLM stays in process; the caller hears the answer, and the
gateway's own Whisper, listening to what the caller heard, hears what the answer's transcript says.
A gateway process started with ``--stt-backend openai_http --tts-backend openai_http`` and no speech
server behind them starts anyway, reports each failed stage to the caller as an ``error`` event that
does not show the server's URL, and keeps the session and the gateway serving.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.models.backends import load_backend
from gateway.models.base import ModelSet
from gateway.models.openai_http.stt import OpenAIHttpSpeechToText
from gateway.models.openai_http.tts import OpenAIHttpTextToSpeech
from gateway.server.runner import free_port
from tests.e2e.test_call_loop import one_turn, to_16k_float
from tests.helpers import QUESTION, says, serve, similarity
from tests.models.speech_servers import STT_MODEL, TTS_KEY
from tests.ops.services import start_gateway, wait_healthy

pytestmark = pytest.mark.slow


def http_speech(models: ModelSet, stt_url: str, tts_url: str) -> tuple[GatewayConfig, ModelSet]:
    """A config with both speech stages on the servers, and the models it loads for them (VAD,
    end of turn and LLM are the suite's own)."""
    config = GatewayConfig(
        port=free_port(),
        pool_size=1,
        talking_capacity=1,
        stt_backend="openai_http",
        stt_base_url=stt_url,
        stt_model=STT_MODEL,
        tts_backend="openai_http",
        tts_base_url=tts_url,
        tts_api_key=TTS_KEY,
    )
    stt, tts = load_backend("stt", config), load_backend("tts", config)
    assert isinstance(stt, OpenAIHttpSpeechToText) and isinstance(tts, OpenAIHttpTextToSpeech)
    list(tts.synthesize("Hello."))  # the warm-up the loader does: the voice's rate is known
    return config, dataclasses.replace(models, stt=stt, tts=tts)


async def test_a_spoken_turn_is_heard_and_answered_through_the_speech_servers(
    models: ModelSet, speech, stt_server: str, tts_server: str
) -> None:
    config, http = http_speech(models, stt_server, tts_server)
    async with serve(config, http) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        await one_turn(client, speech(QUESTION))

        user = client.of_type("conversation.item.input_audio_transcription.completed")[-1]["transcript"]
        assert says(user, QUESTION), user  # heard by faster-whisper-server
        done = client.of_type("response.done")[-1]["response"]
        assert done["status"] == "completed", done
        said = client.of_type("response.output_audio_transcript.done")[-1]["transcript"]

        started = client.time_of(client.of_type("output_audio_buffer.started")[-1])
        reply = client.heard.samples(since=started - 0.5)
        assert np.abs(reply).max() > 2000 and len(client.heard.voiced_times()) * 0.02 >= 0.5
        heard = models.stt.transcribe(to_16k_float(reply))  # spoken by local-tts-studio
        assert similarity(heard, said) >= 0.6, (heard, said)
        await client.hangup()


async def test_with_the_speech_servers_down_the_caller_gets_errors_and_the_call_goes_on(tmp_path: Path, speech) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    flags = ["--stt-backend", "openai_http", "--stt-base-url", dead, "--tts-backend", "openai_http"]
    service, url = start_gateway(tmp_path, *flags, "--tts-base-url", dead, "--pool-size", "1")
    try:
        await wait_healthy(service, url)  # it starts without its speech servers
        client = RealtimeClient(url)
        assert await client.connect() == 201

        mark = len(client.events)
        client.say(speech(QUESTION))
        error = (await client.wait_for("error", timeout=60, after=mark))["error"]
        assert error["code"] == "stt_failed", error
        failed = await client.wait_for("conversation.item.input_audio_transcription.failed", timeout=10, after=mark)
        assert "127.0.0.1" not in str(error) + str(failed)  # the URL is for the log only

        mark = client.ask("Say hello.")  # an audio answer: TTS fails
        error = (await client.wait_for("error", timeout=60, after=mark))["error"]
        assert error["code"] == "tts_failed" and "127.0.0.1" not in str(error), error
        done = (await client.wait_for("response.done", timeout=30, after=mark))["response"]
        assert done["status"] == "failed", done

        mark = client.ask("Say hello.", response={"output_modalities": ["text"]})  # the session goes on
        done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
        assert done["status"] in ("completed", "incomplete") and done["output"][0]["content"][0]["text"], done
        await client.hangup()

        second = RealtimeClient(url)  # and so does the gateway
        assert await second.connect() == 201
        await second.hangup()
        assert "cannot be reached" in service.log and dead in service.log  # why, for the operator
    finally:
        service.stop()
