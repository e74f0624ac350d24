"""The load generator (``voice-gateway loadtest``, ``gateway.loadgen``): its command line, and one
real run end to end: two simulated callers over real WebRTC on loopback, one spoken question each,
against a gateway on the real models, with the table, the plot and the gateway's counters (the
preemptive replies by outcome among them)."""

from __future__ import annotations

import time
import wave
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from gateway.cli import build_parser
from gateway.loadgen.plot import svg_plot
from gateway.loadgen.report import Phase, as_json, counters_line, refusal_lines, summary_table, turn_table
from gateway.loadgen.run import Plan, run, run_phase, wait_admitting
from gateway.loadgen.speech import conversation, load_questions, speech_files
from gateway.loadgen.turns import wait_pool_idle
from gateway.loadgen.watch import PREEMPTIVE, counters, labelled_key
from tests.doubles import DrainingGatewayDouble, SettlingPoolDouble
from tests.helpers import QUESTION, app_idle, says, serve, wait_until


def write_wav(path: Path, samples: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(48000)
        out.writeframes(samples.astype(np.int16).tobytes())
    return path


def test_the_command_line_takes_its_flags_then_the_gateways(tmp_path: Path) -> None:
    folder = tmp_path / "speech"
    folder.mkdir()
    (folder / "transcripts.tsv").write_text("file\ttext\na.wav\thello there\nb.wav\t(silence)\nc.raw\tgo\n")
    args = build_parser().parse_args(
        ["loadtest", "--speech", str(folder), "--callers", "2,6", "--silent", "4", "--", "--pool-size", "8"]
    )
    assert args.callers == "2,6" and args.silent == 4 and args.turns == 3 and args.stagger_s == 1.3
    assert args.transport == "webrtc"
    assert build_parser().parse_args(["loadtest", "--speech", "x", "--transport", "websocket"]).transport == "websocket"
    assert [a for a in args.gateway_args if a != "--"] == ["--pool-size", "8"]
    assert speech_files([folder]) == [folder / "a.wav"], "speech WAVs with a transcript only"


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["webrtc", "websocket"])
async def test_two_callers_one_turn_each_end_to_end(models, gateway_config, speech, tmp_path: Path, transport) -> None:
    files = [
        write_wav(tmp_path / "italy.wav", np.concatenate([speech(QUESTION), np.zeros(48000, np.int16)])),
        write_wav(
            tmp_path / "weather.wav", np.concatenate([speech("Will it rain tomorrow?"), np.zeros(48000, np.int16)])
        ),
    ]
    questions = load_questions(files)
    assert [round(q.tail_s) for q in questions] == [1, 1], "the silence after each question, by the VAD"
    assert [q.name for q in conversation(questions, 1, 1)] == ["weather.wav"]
    plan = Plan(questions, callers=[2], turns=1, think_s=0.0, stagger_s=0.5, baseline=False, transport=transport)
    config = gateway_config(pool_size=2, max_response_tokens=12)
    async with serve(config, models) as (url, app):
        phases = await run(url, plan)
        assert await wait_until(lambda: app_idle(app), 30)
        metrics = await preemptive_metrics(url)
    (phase,) = phases
    counts = phase.preemptive()
    assert counts is not None, "the gateway's preemptive replies were read"
    assert counts == metrics, (counts, metrics)  # a fresh gateway: the phase's deltas are its totals
    assert sum(counts.values()) == sum(metrics.values()) >= 1, "a reply was started at a pause (or skipped)"
    assert "preemptive replies: used" in counters_line(phase)
    assert [call.status for call in phase.calls] == [201, 201]
    turns = sorted(phase.turns, key=lambda t: t.caller)
    assert [t.question for t in turns] == ["italy.wav", "weather.wav"]
    assert all(t.v2v_ms is not None and t.v2v_ms > 0 and not t.failed for t in turns), turns
    assert says(turns[0].heard, QUESTION), turns[0].heard
    assert all(t.said and t.reply_s and t.stages.get("stt") is not None for t in turns), turns
    assert all(call.log and call.log[0]["kind"] == "heard" for call in phase.calls), "each call's own log"
    assert "vg_playout_underruns" in phase.counters, "the gateway's deadline misses were read"
    assert phase.watch is not None and phase.watch.peak_in_use >= 1
    table = summary_table(phases, None)
    assert "| 2 callers | 2 of 2 | none | 2 of 2 |" in table, table
    cell = f"| {counts['used']} / {counts['discarded']} / {counts['skipped']} |"
    assert table.splitlines()[-1].endswith(cell), table
    assert "italy.wav" in turn_table(phase, None)
    plot = svg_plot(phases, None, "two callers")
    assert plot.startswith("<svg") and plot.count("<circle") >= 2 + 2 and plot.endswith("</svg>")


async def preemptive_metrics(url: str) -> dict[str, int]:
    """``vg_preemptive_replies_total`` of the gateway at ``url`` by outcome, read from ``/metrics`` here."""
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as response:
        text = await response.text()
    return {
        sample.labels["outcome"]: round(sample.value)
        for family in text_string_to_metric_families(text)
        if family.name == "vg_preemptive_replies"
        for sample in family.samples
        if sample.name == "vg_preemptive_replies_total"
    }


async def test_the_preemptive_counts_are_read_from_the_gateway_and_reported(models, gateway_config) -> None:
    async with serve(gateway_config(), models) as (url, _app):
        read = await counters(url)
        metrics = await preemptive_metrics(url)
    assert set(metrics) == {"used", "discarded", "skipped"}, metrics
    phase = Phase(2, False, [], 1.0, counters=read)
    assert phase.preemptive() == metrics == {"used": 0, "discarded": 0, "skipped": 0}
    assert "preemptive replies: used 0, discarded 0, skipped 0" in counters_line(phase)
    assert summary_table([phase], None).endswith("| 0 / 0 / 0 |")
    assert as_json([phase], {})["phases"][0]["preemptive_replies"] == metrics
    drafts = {"started": 0, "hits": 0, "discarded": 0, "skipped": 0}
    assert phase.drafts() == drafts, "the speculative STT counts, skipped drafts among them, are read too"
    assert "speculative STT: started 0, hits 0, discarded 0, skipped 0" in counters_line(phase)
    assert as_json([phase], {})["phases"][0]["stt_drafts"] == drafts
    older = Phase(2, False, [], 1.0, counters={"vg_playout_underruns": 0.0})  # a gateway without the metric
    assert older.preemptive() is None and summary_table([older], None).endswith("| n/a |")
    assert older.drafts() is None


async def test_a_phase_waits_for_the_gateway_to_admit_again(capsys) -> None:
    pool = SettlingPoolDouble(busy_polls=2)
    app = web.Application()
    app.router.add_get("/v1/pool", pool.handle)
    async with TestServer(app, host="127.0.0.1") as server:
        url = str(server.make_url("")).rstrip("/")
        await wait_admitting(url, None, timeout=30.0)
        assert pool.polls == 3, "polled until the admission was no longer busy"
        assert "waited" in capsys.readouterr().out
        pool.busy_polls, pool.polls = 10**6, 0
        await wait_admitting(url, None, timeout=1.5)
        assert "still refuses new calls" in capsys.readouterr().out, "bounded: the phase then starts anyway"


@pytest.mark.parametrize("key", [None, "sk-test"])
async def test_a_phases_counters_are_read_once_its_units_have_drained(key) -> None:
    """A hang-up's discard of a preemptive reply lands while the call's unit drains, after the
    callers are done: the phase's "after" counters were read at once and missed it. The phase now
    waits (bounded) until ``/v1/pool`` says no unit is in use, with the run's key where it has one."""
    gateway = DrainingGatewayDouble(drain_polls=3, key=key)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    async with TestServer(gateway.app(), host="127.0.0.1") as server:
        url = str(server.make_url("")).rstrip("/")
        plan = Plan([], callers=[0], baseline=False, headers=headers)
        phase = await run_phase(url, plan, callers=0, gateway=None)
    assert gateway.pool_polls >= 3, "polled /v1/pool until the unit had drained"
    assert phase.counters == {labelled_key(PREEMPTIVE, "outcome", "discarded"): 1.0}, phase.counters


async def test_a_refused_key_is_said_at_once_not_waited_out() -> None:
    """A gateway with an API key answers ``/v1/pool`` 401 to a run without it: the wait for the
    pool to drain said so only after its timeout, as "did not become idle" (or not at all when
    not required); it now raises PermissionError on the first answer."""
    gateway = DrainingGatewayDouble(drain_polls=0, key="sk-test")
    async with TestServer(gateway.app(), host="127.0.0.1") as server:
        url = str(server.make_url("")).rstrip("/")
        for required in (True, False):
            started = time.monotonic()
            with pytest.raises(PermissionError, match="401"):
                await wait_pool_idle(url, timeout=20.0, headers={"Authorization": "Bearer wrong"}, required=required)
            assert time.monotonic() - started < 5
        assert await wait_pool_idle(url, timeout=5.0, headers={"Authorization": "Bearer sk-test"})


async def test_a_refused_caller_says_why_the_gateway_refused_it(models, gateway_config) -> None:
    """A 503 says which admission rule refused the call (its body's message, with the figures); the
    load generator kept only the code (``compute_busy``), so a run could not tell which rule left
    capacity unused. Two silent callers over real WebRTC, a gateway that takes one at a time."""
    plan = Plan([], callers=[2], baseline=False, stagger_s=0.5)
    async with serve(gateway_config(pool_size=2, talking_capacity=1), models) as (url, _app):
        phase = await run_phase(url, plan, callers=2, gateway=None, silent=True)
    first, second = phase.calls
    assert first.status == 201 and second.status == 503 and second.code == "compute_busy", phase.calls
    assert "answers 1 calls at once (setting)" in second.message, second.message
    assert refusal_lines(phase) == [f"caller 2 refused: {second.message}"]
    assert as_json([phase], {})["phases"][0]["calls"][1]["message"] == second.message


@pytest.mark.slow  # a real call or generation of several seconds (the default suite is at its bar)
async def test_a_websocket_caller_refused_says_why_the_gateway_refused_it(models, gateway_config) -> None:
    """Over the Realtime WebSocket a refusal is the upgrade's 503, and aiohttp raises
    ``WSServerHandshakeError`` without reading its body: the report showed the status alone, not
    the gateway's JSON error (its code and why). Two silent callers over real WebSockets, a gateway
    with one unit: the second finds the pool full. Failed before: no code, no message."""
    plan = Plan([], callers=[2], baseline=False, stagger_s=0.5, transport="websocket")
    async with serve(gateway_config(pool_size=1, talking_capacity=0, retry_after_s=7), models) as (url, _app):
        phase = await run_phase(url, plan, callers=2, gateway=None, silent=True)
    first, second = phase.calls
    assert first.status == 201 and second.status == 503, phase.calls
    assert second.code == "pool_full" and second.retry_after == "7", second
    assert second.message and refusal_lines(phase) == [f"caller 2 refused: {second.message}"]
