"""Barge-in that understands words, over real WebRTC with the real models: a backchannel under a long
answer leaves it playing and unanswered; "wait, stop" still stops it; the assistant's own echo on a
leg without echo cancellation interrupts nothing, while a caller's voice over it still does.

The caller is a second voice (``caller_speech``: the bundled voice made deterministic and raised in
pitch), never the assistant's own."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import numpy as np
import pytest

from gateway.client import RealtimeClient
from tests.doubles import SlowProbesSpeechToTextDouble
from tests.helpers import EchoingMicrophone, serve, wait_until

LONG_ANSWER = "Tell me a long story about a brave little dragon."
TURN_EVENTS = ("input_audio_buffer.speech_started", "output_audio_buffer.cleared", "response.created")
log = logging.getLogger(__name__)


def onset_index(samples: np.ndarray) -> int:
    """Index of the first sample of int16 ``samples`` louder than -30 dBFS (the corpus's onset)."""
    return int(np.argmax(np.abs(samples.astype(np.int32)) > 1000))


async def long_answer_playing(client: RealtimeClient, speech) -> str:
    """Ask for a long answer and let it play 2 s; returns its response id."""
    client.say(speech(LONG_ANSWER))
    started = await client.wait_for("output_audio_buffer.started", timeout=90)
    await asyncio.sleep(2.0)
    return started["response_id"]


@pytest.mark.slow  # tens of seconds of model turns
async def test_backchannel_leaves_the_answer_playing_and_unanswered(models, speech, caller_speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=80), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        answer = await long_answer_playing(client, speech)
        mark = len(client.events)
        client.say(caller_speech("Yeah."))
        decided = await client.wait_for("gateway.barge_in", timeout=20, after=mark)
        assert decided["decision"] == "resumed", decided
        assert decided["response_id"] == answer
        stopped = await client.wait_for("output_audio_buffer.stopped", timeout=120, after=mark)
        assert stopped["response_id"] == answer, "the answer did not play to its end"
        # Audio kept arriving after the decision, and the answer was the same one to the end.
        assert [t for t in client.heard.voiced_times() if client.time_of(decided) < t < client.time_of(stopped)]
        done = [e for e in client.of_type("response.done") if e["response"]["id"] == answer]
        # Not cancelled: it ran to its end (or to the 80-token cap, "incomplete").
        assert [e["response"]["status"] for e in done] in (["completed"], ["incomplete"])
        await asyncio.sleep(1.5)  # a response to the backchannel would have started by now
        after = client.events[mark:]
        assert not [e for e in after if e["type"] in TURN_EVENTS], [e["type"] for e in after]
        assert not [e for e in after if e["type"] == "conversation.item.added" and e["item"].get("role") == "user"]
        await client.hangup()


async def test_wait_stop_still_stops_the_answer(models, speech, caller_speech, gateway_config):
    async with serve(gateway_config(max_response_tokens=80), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        answer = await long_answer_playing(client, speech)
        mark = len(client.events)
        said = caller_speech("Wait, stop.")
        client.say(said)
        decided = await client.wait_for("gateway.barge_in", timeout=20, after=mark)
        assert decided["decision"] == "interrupted", decided
        # Loose bound (10x the ~600 ms measured by scripts/bench_bargein.py), in input-stream time.
        assert decided["decided_ms"] - decided["audio_start_ms"] < 6000
        cleared = await client.wait_for("output_audio_buffer.cleared", timeout=5, after=mark)
        assert cleared["response_id"] == answer
        # The audio is cleared with the decision, not after another wait: the two events come
        # together on the data channel (measured 2026-12-05, h51: see docs/BENCHMARKS.md).
        gap_ms = (client.time_of(cleared) - client.time_of(decided)) * 1000
        await wait_until(lambda: not client.mic.speaking, timeout=10)
        onset = client.mic.finished_at - (said.size - onset_index(said)) / 48000
        log.info(
            "barge-in: decided %d ms after the onset (input stream); cleared %+.0f ms from the decision, "
            "%.0f ms after the onset (client clock)",
            decided["decided_ms"] - decided["audio_start_ms"],
            gap_ms,
            (client.time_of(cleared) - onset) * 1000,
        )
        assert abs(gap_ms) < 250, gap_ms
        started = client.of_type("input_audio_buffer.speech_started", after=mark)
        assert started and client.events.index(started[0]) < client.events.index(cleared)
        done = await client.wait_for("response.done", timeout=10, after=mark)
        assert done["response"]["id"] == answer and done["response"]["status"] == "cancelled"
        await client.hangup()


@pytest.mark.slow  # two real calls with echo (~11 s; needs 100 voiced frames, load-sensitive); CI runs it with -m slow
async def test_own_echo_fires_no_barge_in_and_a_voice_over_it_still_does(
    models, speech, caller_speech, gateway_config, caplog
):
    caplog.set_level(logging.DEBUG, logger="gateway.pipeline.vad")  # each probe's words, for a failure's message
    async with serve(gateway_config(max_response_tokens=80), models) as (url, _app):
        client = RealtimeClient(url)
        mic = client.mic = EchoingMicrophone(client.heard, delay_ms=150, gain_db=-12.0)
        await client.connect()
        client.say(speech(LONG_ANSWER))
        started = await client.wait_for("output_audio_buffer.started", timeout=90)
        mark, echoed_before = len(client.events), mic.echoed_voiced
        # The answer echoes back into the microphone: wait for 200 voiced frames (4 s) of it sent,
        # not a fixed time (on a busy box the answer comes slower than real time; a fixed 6 s then
        # held fewer than 100 voiced frames and the test failed, the gateway having done no wrong).
        echoed = await wait_until(lambda: mic.echoed_voiced - echoed_before >= 200, timeout=120)
        assert echoed, f"the answer was not playing: {mic.echoed_voiced - echoed_before} voiced frames echoed"
        await asyncio.sleep(0.5)  # the last echo through the VAD (it reads in real time)
        after = client.events[mark:]
        assert not [e for e in after if e["type"] in (*TURN_EVENTS, "gateway.barge_in")], [e["type"] for e in after]
        # The caller speaks over the echo: that is a barge-in. What Whisper makes of the two words under
        # the echo is often unsure ("Wait" at p < 0.4); unsure words that are no backchannel never
        # resume the answer (before, they did in some runs).
        spoke = len(client.events)
        client.say(caller_speech("Wait, stop."))
        try:
            cleared = await client.wait_for("output_audio_buffer.cleared", timeout=20, after=mark)
        except TimeoutError:
            # Say what the gateway did instead (a CI run once timed out here with nothing else shown).
            seen = [
                (e["type"], e.get("decision"), e.get("transcript")) if e["type"] == "gateway.barge_in" else e["type"]
                for e in client.events[spoke:]
                if not e["type"].endswith(".delta")
            ]
            probes = [
                r.getMessage() for r in caplog.records if r.name == "gateway.pipeline.vad" and "barge-in" in r.msg
            ]
            said = "".join(e.get("delta", "") for e in client.of_type("response.output_audio_transcript.delta"))
            pytest.fail(
                f"no output_audio_buffer.cleared within 20 s of the caller's words; events since: {seen}; "
                f"the gateway's barge-in log: {probes}; the answer echoed: {said!r}"
            )
        assert cleared["response_id"] == started["response_id"]
        await client.hangup()


def two_parts(first: np.ndarray, second: np.ndarray, pause_ms: int) -> np.ndarray:
    """``first`` then ``second`` (int16 48 kHz), ``pause_ms`` of silence between their loud parts."""

    def loud(audio: np.ndarray) -> np.ndarray:
        return np.flatnonzero(np.abs(audio.astype(np.int32)) > 300)

    gap = np.zeros(int(pause_ms * 48), np.int16)
    return np.concatenate([first[: loud(first)[-1] + 1], gap, second[loud(second)[0] :]])


@pytest.mark.slow  # tens of seconds of model turns
async def test_a_backchannel_in_two_parts_leaves_the_answer_playing(
    models, speech, caller_speech, gateway_config, caplog
):
    # "Okay... okay." with 350 ms between the two under the answer: Smart Turn ends the held turn at
    # the pause, and each probe's answer comes 0.6 s late (a busy box), so the second part starts before
    # the first is decided. Before h40 that start released the first part as an interruption with no
    # words known ("interrupted", transcript "": the answer cut); now it joins the held turn.
    caplog.set_level(logging.DEBUG, logger="gateway.pipeline.vad")  # what the probes heard, for a failure
    slow = dataclasses.replace(models, stt=SlowProbesSpeechToTextDouble(models.stt, 0.6))
    async with serve(gateway_config(max_response_tokens=80), slow) as (url, _app):
        client = RealtimeClient(url)
        await client.connect()
        answer = await long_answer_playing(client, speech)
        mark = len(client.events)
        client.say(two_parts(caller_speech("Okay."), caller_speech("Okay."), 350))
        await client.wait_for("gateway.barge_in", timeout=20, after=mark)
        await asyncio.sleep(4.0)  # both parts in and decided, a response to them begun
        assert_resumed(client, mark, answer, barge_in_log(caplog))
        await client.hangup()


@pytest.mark.slow  # tens of seconds of model turns
async def test_a_backchannel_with_pauses_inside_one_held_turn_leaves_the_answer_playing(
    models, speech, caller_speech, gateway_config, caplog
):
    # "Okay." 400 ms "Okay." 400 ms "Okay." under the answer, the client's server_vad ending turns
    # after 800 ms of silence: one held turn, ~1.3 s said, ~1.8 s from its onset. Before h41 the
    # length rule (max_backchannel_ms, 1500) counted the pauses as speech and cut the answer in the
    # third "Okay." whatever its words.
    caplog.set_level(logging.DEBUG, logger="gateway.pipeline.vad")  # what the probes heard, for a failure
    session = {"audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 800}}}}
    async with serve(gateway_config(max_response_tokens=80), models) as (url, _app):
        client = RealtimeClient(url)
        await client.connect(session=session)
        await client.wait_for("session.updated", timeout=20)
        answer = await long_answer_playing(client, speech)
        mark = len(client.events)
        okay = caller_speech("Okay.")
        client.say(two_parts(two_parts(okay, okay, 400), okay, 400))
        await client.wait_for("gateway.barge_in", timeout=20, after=mark)
        await asyncio.sleep(4.0)  # all three in and decided, a response to them begun
        log = barge_in_log(caplog)
        assert not [m for m in log if "joined" in m], ("the turn ended at a pause: not one held turn", log)
        assert_resumed(client, mark, answer, log)
        await client.hangup()


def barge_in_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The VAD stage's barge-in log lines (what the probes heard), shown when an assertion fails."""
    return [r.getMessage() for r in caplog.records if r.name == "gateway.pipeline.vad" and "barge-in" in r.msg]


def assert_resumed(client: RealtimeClient, mark: int, answer: str, log: list[str]) -> None:
    """Every barge-in after event ``mark`` was decided "resumed": no turn events, and the answer
    (response ``answer``) was not cancelled."""
    decided = [(e["decision"], e["transcript"]) for e in client.of_type("gateway.barge_in", after=mark)]
    assert {decision for decision, _ in decided} == {"resumed"}, (decided, log)
    after = client.events[mark:]
    assert not [e for e in after if e["type"] in TURN_EVENTS], ([e["type"] for e in after], log)
    done = [e for e in client.of_type("response.done") if e["response"]["id"] == answer]
    assert not [e for e in done if e["response"]["status"] == "cancelled"]
