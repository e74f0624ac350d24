"""Recording over the Realtime WebSocket, on the real gateway (no spoken turn): off unless the
operator set a record directory and the session asked (or every call is recorded); a session that
asks on a gateway without one gets an error and goes on; the files are written whatever ended the
call (the client leaving, the gateway shutting down) and whatever happened to the disk; key
presses reach the session but not the logs and reports, unless the operator keeps them."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import wave

import numpy as np
import pytest

from gateway.server.app_keys import SESSIONS
from tests.doubles import DiskFullOnceFileDouble
from tests.helpers import QUESTION, app_idle, says, serve, wait_until
from tests.transports.websocket.ws_client import EventClient


def wav_seconds(path) -> tuple[int, float]:
    with wave.open(str(path), "rb") as wav:
        return wav.getnchannels(), wav.getnframes() / wav.getframerate()


async def test_asking_without_a_record_dir_is_an_error_and_the_session_goes_on(models, gateway_config, tmp_path):
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", event_id="evt_rec", session={"type": "realtime", "recording": True})
            error = (await client.wait_for("error", timeout=10))["error"]
            assert error["type"] == "invalid_request_error"
            assert error["code"] == "recording_unavailable" and error["param"] == "session.recording"
            assert error["event_id"] == "evt_rec" and "record directory" in error["message"]
            await client.send("session.update", session={"type": "realtime", "instructions": "Be brief."})
            updated = await client.wait_for("session.updated", timeout=10)
            assert updated["session"]["instructions"] == "Be brief."
            # A malformed flag is a validation error like any other field's.
            await client.send("session.update", session={"type": "realtime", "recording": "yes"})
            error = (await client.wait_for("error", timeout=10, count=2))["error"]
            assert error["param"] == "session.recording"
        assert await wait_until(lambda: app_idle(app), 10)


async def test_nothing_is_written_unless_the_session_asks(models, gateway_config, tmp_path):
    async with serve(gateway_config(record_dir=str(tmp_path)), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.stream(np.zeros(48000 // 2, np.int16))
        assert await wait_until(lambda: app_idle(app), 10)
    assert list(tmp_path.iterdir()) == []


async def test_a_recorded_call_leaves_a_wav_and_report_of_its_length(models, gateway_config, tmp_path):
    async with serve(gateway_config(record_dir=str(tmp_path)), models) as (url, _app):
        async with EventClient(url) as client:
            started = time.monotonic()
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", session={"type": "realtime", "recording": True})
            await client.wait_for("session.updated", timeout=10)
            await client.stream(np.zeros(48000, np.int16))
        length = time.monotonic() - started
        assert await wait_until(lambda: len(list(tmp_path.glob("*.json"))) == 1, 10)
    report_path = next(tmp_path.glob("*.json"))
    report = json.loads(report_path.read_text())
    assert report["call_id"].startswith("ws_") and report["transport"] == "websocket"
    assert report["end_reason"] == "websocket_closed" and report["items"] == []
    assert report["recording"]["file"] == f"{report['call_id']}.wav"
    channels, seconds = wav_seconds(tmp_path / report["recording"]["file"])
    assert channels == 2
    assert abs(seconds - report["duration_s"]) < 0.1
    assert 1.0 <= seconds <= length + 0.5
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([report_path.name, report["recording"]["file"]])


async def test_every_call_mode_records_without_asking_and_is_written_at_shutdown(models, gateway_config, tmp_path):
    config = gateway_config(record_dir=str(tmp_path), record_all_calls=True)
    async with serve(config, models) as (url, _app):
        client = EventClient(url)
        await client.__aenter__()
        await client.wait_for("session.created", timeout=10)
        await client.send("session.update", session={"type": "realtime", "recording": False})
        error = (await client.wait_for("error", timeout=10))["error"]
        assert error["code"] == "recording_required" and error["type"] == "invalid_request_error"
    await client.close()
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert [r["end_reason"] for r in reports] == ["server_shutdown"]
    assert (tmp_path / reports[0]["recording"]["file"]).is_file()


async def test_a_full_disk_mid_call_leaves_the_report_and_the_audio_that_reached_the_disk(
    models, gateway_config, tmp_path
):
    async with serve(gateway_config(record_dir=str(tmp_path), record_all_calls=True), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            (session,) = app[SESSIONS].sessions.values()
            assert session.record is not None
            audio = session.record.audio
            audio._caller.file = DiskFullOnceFileDouble(audio._caller.file, fail_at=5)
            await client.stream((8000 * np.sin(np.arange(48000 * 3) / 48000 * 2 * np.pi * 440)).astype(np.int16))
            assert await wait_until(lambda: audio.failed, 10)
        assert await wait_until(lambda: len(list(tmp_path.glob("*.json"))) == 1, 10)
    report = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert report["end_reason"] == "websocket_closed" and report["duration_s"] >= 3.0
    recording = report["recording"]
    assert recording["complete"] is False and recording["error"] == "No space left on device"
    channels, seconds = wav_seconds(tmp_path / recording["file"])  # a valid WAV of what reached the disk
    assert channels == 2 and abs(seconds - recording["duration_s"]) < 0.001
    assert 0.0 < seconds < report["duration_s"] - 1.0
    assert not list(tmp_path.glob(".partial-*"))


@pytest.mark.parametrize("keep_digits", [False, True])
async def test_key_presses_reach_the_session_but_logs_and_reports_show_stars(
    models, gateway_config, tmp_path, caplog, keep_digits
):
    """``record_dtmf_digits`` off (the default): the digits reach the client and the model; the
    log lines, the report's key presses and the user items that put them into words show '*'."""
    config = gateway_config(
        record_dir=str(tmp_path),
        record_all_calls=True,
        dtmf_to_llm=True,
        max_response_tokens=4,
        record_dtmf_digits=keep_digits,
    )
    caplog.set_level(logging.INFO, logger="gateway.transports.live_session")
    async with serve(config, models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            (session,) = app[SESSIONS].sessions.values()
            for digit in "15#":
                session.key_press(digit)  # as each transport hands a DTMF key press to the door
            await client.wait_for("input_audio_buffer.dtmf_event_received", timeout=10, count=3)
            assert [e["event"] for e in client.of_type("input_audio_buffer.dtmf_event_received")] == ["1", "5", "#"]
            texts = [part.get("text") for item in session.realtime.items for part in item.get("content", [])]
            assert "I pressed 5 on my keypad." in texts  # what the model reads
        assert await wait_until(lambda: len(list(tmp_path.glob("*.json"))) == 1, 20)
    path = next(tmp_path.glob("*.json"))
    report = json.loads(path.read_text())
    shown = ["1", "5", "#"] if keep_digits else ["*", "*", "*"]
    assert report["key_presses"] == shown
    users = [p["text"] for i in report["items"] if i.get("role") == "user" for p in i["content"] if "text" in p]
    assert users and set(users) <= {f"I pressed {key} on my keypad." for key in shown}
    assert ("I pressed 5" in path.read_text()) is keep_digits
    logged = [r.getMessage().rsplit(" ", 1)[1] for r in caplog.records if "key press" in r.getMessage()]
    assert logged == shown


@pytest.mark.slow
async def test_a_spoken_turn_over_the_websocket_is_recorded_as_the_caller_hears_it(
    models, speech, gateway_config, tmp_path
):
    """The assistant's channel of an event transport comes from the pacer: placed where the
    caller's playback clock plays it, so it follows the question, as over WebRTC."""
    async with serve(gateway_config(record_dir=str(tmp_path), max_response_tokens=24), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", session={"type": "realtime", "recording": True})
            await client.wait_for("session.updated", timeout=10)
            await client.stream(speech(QUESTION), silence_s=1.2)
            await client.wait_for("response.done", timeout=90)
            await asyncio.sleep(client.audio().size / 24000 + 0.5)  # the reply has played out
        assert await wait_until(lambda: len(list(tmp_path.glob("*.json"))) == 1, 10)
    report = json.loads(next(tmp_path.glob("*.json")).read_text())
    user = next(i for i in report["items"] if i.get("role") == "user")["content"][0]["transcript"]
    assert says(user, QUESTION), user
    with wave.open(str(tmp_path / report["recording"]["file"]), "rb") as wav:
        rate = wav.getframerate()
        frames = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").reshape(-1, 2)
    step = rate // 50
    rms = np.sqrt(np.mean(frames[: frames.shape[0] // step * step].astype(float).reshape(-1, step, 2) ** 2, axis=1))
    caller, answer = np.flatnonzero(rms[:, 0] > 300), np.flatnonzero(rms[:, 1] > 300)
    assert caller.size * 0.02 >= 1.0 and answer.size * 0.02 >= 0.5
    assert answer[0] > caller[-1]  # the answer follows the question on the timeline
