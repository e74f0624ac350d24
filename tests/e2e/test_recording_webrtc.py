"""A recorded call over real WebRTC (aiortc on loopback): the caller asks a question, hears the
answer and hangs up; the stereo WAV has the caller's voice on the left while they spoke and the
assistant's on the right while it answered, on one timeline as long as the call, and the report
has the turn (transcripts, latencies) and the end reason."""

from __future__ import annotations

import json
import time
import wave

import numpy as np

from gateway.client import RealtimeClient
from tests.helpers import QUESTION, app_idle, says, serve, wait_until

FRAME_S = 0.02
ONE_TURN = {"type": "server_vad", "silence_duration_ms": 800}


def voiced_frames(channel: np.ndarray, rate: int, level: float = 300.0) -> np.ndarray:
    """Start times (s) of the 20 ms frames of ``channel`` louder than ``level`` RMS."""
    step = int(rate * FRAME_S)
    frames = channel[: channel.size // step * step].astype(np.float64).reshape(-1, step)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    return np.flatnonzero(rms > level) * FRAME_S


async def test_a_recorded_call_has_both_voices_aligned_and_a_report(models, speech, gateway_config, tmp_path):
    async with serve(gateway_config(record_dir=str(tmp_path)), models) as (url, _app):
        client = RealtimeClient(url)
        started = time.monotonic()
        # One turn: 800 ms of silence ends it. In one full fresh-clone run the default detector
        # ended a turn after "What", and the answer to "What" overlapped the rest of the question.
        session = {"type": "realtime", "recording": True, "audio": {"input": {"turn_detection": ONE_TURN}}}
        assert await client.connect(offer_session=session) == 201
        client.say(speech(QUESTION))
        await client.wait_for("response.done", timeout=90)
        await client.wait_for("output_audio_buffer.stopped", timeout=30)
        await client.hangup()
        length = time.monotonic() - started
        call_id = client.call_id
        assert await wait_until(lambda: (tmp_path / f"{call_id}.json").exists(), 10)
        await client.close()

    report = json.loads((tmp_path / f"{call_id}.json").read_text())
    assert report["call_id"] == call_id and report["transport"] == "webrtc"
    assert report["end_reason"] == "client_hangup"
    user = [i for i in report["items"] if i.get("role") == "user"]
    assistant = [i for i in report["items"] if i.get("role") == "assistant"]
    assert user and says(user[0]["content"][0]["transcript"], QUESTION), user
    said = assistant[0]["content"][0]["transcript"]
    assert said.strip()
    done = client.of_type("response.done")[-1]["response"]
    turn = report["turns"][-1]
    assert turn["response_id"] == done["id"] and turn["latency_ms"]["voice_to_voice"] > 0

    with wave.open(str(tmp_path / report["recording"]["file"]), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth()) == (2, 2)
        rate = wav.getframerate()
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    seconds = frames.shape[0] / rate
    assert abs(seconds - report["duration_s"]) < 0.1 and seconds <= length + 0.5
    caller, answer = voiced_frames(frames[:, 0], rate), voiced_frames(frames[:, 1], rate)
    assert caller.size * FRAME_S >= 1.0, "less than 1 s of the caller's voice on the left"
    assert answer.size * FRAME_S >= 0.5, "less than 0.5 s of the assistant's voice on the right"
    # Aligned: the answer starts after the question ended, by about the measured voice-to-voice
    # latency (both channels are placed by the same clock), and nothing of it overlaps the question.
    gap = answer[0] - caller[-1]
    assert gap > 0, (caller[-1], answer[0])
    assert abs(gap - turn["latency_ms"]["voice_to_voice"] / 1000) < 0.6, (gap, turn["latency_ms"])


async def test_an_offer_asking_for_recording_without_a_record_dir_is_refused(models, gateway_config, tmp_path):
    async with serve(gateway_config(), models) as (url, app):
        client = RealtimeClient(url)
        status = await client.connect(offer_session={"type": "realtime", "recording": True})
        assert status == 400 and "recording_unavailable" in client.error_body
        await client.close()
        assert await wait_until(lambda: app_idle(app), 10)  # the unit claimed for it is back
