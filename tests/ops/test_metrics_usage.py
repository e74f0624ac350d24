"""What an operator reads: Prometheus metrics (frames in and out, pacing misses, barge-ins, errors by
code, calls by transport and end reason, compute seconds per stage, active sessions), ``/v1/usage``
totals, and the optional protection of the operator routes by the API key."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Optional

import aiohttp
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.client import RealtimeClient
from gateway.media.audio_format import PCM16_24K
from gateway.media.outbound import PacedAudioTrack
from gateway.metrics import GatewayMetrics
from gateway.pipeline.events import BargeInDecided, Interruption, ResponseInterrupted, TurnLatencyMeasured
from tests.helpers import serve
from tests.transports.websocket.ws_client import EventClient


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Prometheus text -> {(sample name, sorted labels): value}."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(parsed: dict, name: str, **labels: str) -> Optional[float]:
    return parsed.get((name, tuple(sorted(labels.items()))))


async def scrape(http: aiohttp.ClientSession, url: str) -> dict:
    async with http.get(f"{url}/metrics") as response:
        assert response.status == 200
        return samples(await response.text())


async def test_a_spoken_turn_shows_in_metrics_and_usage(models, speech, gateway_config):
    async with serve(gateway_config(pool_size=1, instance_id="obs-1"), models) as (url, _app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        assert client.call_id and client.call_id.startswith("rtc_obs-1_") and len(client.call_id) == 42
        client.send_raw("{not json")
        error = await client.wait_for("error", timeout=10)
        mark = len(client.events)
        client.say(speech("What is two plus two?"))
        await client.wait_for("response.done", timeout=90, after=mark)
        await client.wait_for("output_audio_buffer.stopped", timeout=60, after=mark)

        async with aiohttp.ClientSession() as http:
            parsed = await scrape(http, url)
            assert value(parsed, "vg_errors_total", code=error["error"]["code"]) == 1
            assert value(parsed, "vg_active_sessions", transport="webrtc") == 1
            assert value(parsed, "vg_inbound_frames_total") > 50  # over a second of caller audio, 20 ms frames
            assert value(parsed, "vg_outbound_frames_total", content="audio") >= 25
            assert value(parsed, "vg_outbound_frames_total", content="silence") > 0
            assert value(parsed, "vg_outbound_frames_late_total") is not None
            for stage in ("vad", "stt", "llm", "tts"):
                assert value(parsed, "vg_model_compute_seconds_count", stage=stage) >= 1, stage
                assert value(parsed, "vg_model_compute_seconds_sum", stage=stage) > 0, stage
            done = client.of_type("response.done", after=mark)[-1]["response"]
            assert value(parsed, "vg_responses_total", status=done["status"]) == 1
            assert value(parsed, "vg_tokens_total", kind="output") == done["usage"]["output_tokens"] > 0
            assert value(parsed, "vg_turn_latency_ms_count", stage="voice_to_voice") == 1
            for result in ("started", "drafts", "from_drafts"):  # drafts: made while the caller spoke
                assert value(parsed, "vg_stt_speculative_total", result=result) is not None, result
            for outcome in ("used", "discarded", "skipped"):  # the preemptive replies (gateway.pool.preemptive)
                assert value(parsed, "vg_preemptive_replies_total", outcome=outcome) is not None, outcome
            assert value(parsed, "vg_draining") == 0

            async with http.get(f"{url}/v1/usage") as response:
                usage = await response.json()
            assert usage["instance"] == "obs-1" and usage["calls"] == 1
            assert usage["audio_in_s"] > 1.0 and usage["audio_out_s"] >= 0.5
            assert usage["output_tokens"] == done["usage"]["output_tokens"]
            assert usage["responses"][done["status"]] == 1

            async with http.get(f"{url}/v1/pool") as response:
                pool = await response.json()
            shown = pool["units"][0]["call_id"]
            assert pool["instance"] == "obs-1" and pool["draining"] is False
            assert shown == client.call_id[: len("rtc_obs-1_") + 8] + "...", shown

            await client.hangup()
            for _ in range(50):
                parsed = await scrape(http, url)
                if value(parsed, "vg_active_sessions", transport="webrtc") == 0:
                    break
                await asyncio.sleep(0.05)
            assert value(parsed, "vg_calls_ended_total", transport="webrtc", reason="client_hangup") == 1
            assert value(parsed, "vg_call_end_total", reason="client_hangup") == 1
            assert value(parsed, "vg_active_sessions", transport="webrtc") == 0


@pytest.mark.slow  # a real model turn
async def test_a_websocket_reply_counts_as_audio_sent(models, gateway_config):
    """``audio_out_s`` ("reply audio sent") and ``vg_outbound_frames_total{content="audio"}``
    counted only the frames of a media track: a WebSocket session's replies, sent in
    ``response.output_audio.delta``, left both at 0."""
    async with serve(gateway_config(max_response_tokens=16), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            mark = await client.ask("Say hello.")
            done = await client.wait_for("response.done", after=mark, timeout=90)
            assert done["response"]["status"] == "completed", done
            sent_s = client.audio(PCM16_24K).size / 24000
            assert sent_s > 0.3
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/v1/usage") as response:
                usage = await response.json()
            parsed = await scrape(http, url)
    assert abs(usage["audio_out_s"] - sent_s) < 0.05, (usage["audio_out_s"], sent_s)
    assert value(parsed, "vg_outbound_frames_total", content="audio") == round(sent_s / 0.02)


def test_barge_ins_and_latency_from_pipeline_events():
    metrics = GatewayMetrics()
    metrics.observe_pipeline_event(ResponseInterrupted("rtc_x", interruption=Interruption(3, True)))
    metrics.observe_pipeline_event(TurnLatencyMeasured("rtc_x", generation=3, latency_ms={"stt": 200.0, "tts": None}))
    metrics.observe_pipeline_event(BargeInDecided("rtc_x", decision="resumed", transcript="Yeah."))
    metrics.observe_server_event(
        {"type": "response.done", "response": {"status": "cancelled", "usage": {"input_tokens": 0, "output_tokens": 7}}}
    )
    parsed = samples(metrics.render().decode())
    assert value(parsed, "vg_barge_ins_total") == 1
    assert value(parsed, "vg_barge_in_decisions_total", decision="resumed") == 1
    assert value(parsed, "vg_turn_latency_ms_count", stage="stt") == 1
    assert value(parsed, "vg_turn_latency_ms_count", stage="tts") is None
    assert value(parsed, "vg_responses_total", status="cancelled") == 1
    assert metrics.usage().as_json()["responses"]["cancelled"] == 1 and metrics.usage().output_tokens == 7


class _SilentTrack(PacedAudioTrack):
    def next_samples(self) -> np.ndarray:
        return np.zeros(960, np.int16)


async def test_pacing_misses_are_counted_per_frame():
    frames: list[tuple[bool, bool]] = []
    track = _SilentTrack(on_frame=lambda audio, late: frames.append((audio, late)))
    for _ in range(3):
        await track.recv()
    await asyncio.sleep(0.1)  # the event loop was busy: the next frame is 80 ms late
    await track.recv()
    track.stop()
    assert [late for _, late in frames] == [False, False, False, True]
    assert all(audio for audio, _ in frames)


async def test_operator_routes_can_require_the_api_key(models, gateway_config):
    key = "sk-operator-test"
    async with serve(gateway_config(api_key=key, protect_observability=True), models) as (url, _app):
        async with aiohttp.ClientSession() as http:
            for path in ("/metrics", "/v1/pool", "/v1/usage"):
                async with http.get(url + path) as response:
                    assert response.status == 401, path
                    assert (await response.json())["error"]["code"] == "invalid_api_key"
                async with http.get(url + path, headers={"Authorization": f"Bearer {key}"}) as response:
                    assert response.status == 200, path
            async with http.get(f"{url}/healthz") as response:
                assert response.status == 200  # a load balancer's probe carries no key
    async with serve(gateway_config(api_key=key), models) as (url, _app):  # the default: open, as before
        async with aiohttp.ClientSession() as http:
            for path in ("/metrics", "/v1/pool", "/v1/usage"):
                async with http.get(url + path) as response:
                    assert response.status == 200, path


async def test_every_metric_scraped_is_in_the_deployment_table(models, gateway_config):
    """An operator (or an autoscaler's author) reads what ``/metrics`` holds in docs/DEPLOYMENT.md's
    table: ``vg_preemptive_replies_total`` was exported at every scrape and named nowhere there."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "DEPLOYMENT.md").read_text()
    table = text.split("## Metrics and alerts", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"\bvg_[a-z0-9_]*[a-z0-9]", table))
    async with serve(gateway_config(), models) as (url, _app):
        async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as response:
            scraped = text_string_to_metric_families(await response.text())
            # A counter's ``_created`` time reads as a family of its own in the 0.0.4 text format.
            families = {family.name for family in scraped if not family.name.endswith("_created")}
    assert {"vg_load", "vg_calls", "vg_preemptive_replies"} <= families, families
    undocumented = sorted(name for name in families if not {name, f"{name}_total"} & documented)
    assert undocumented == [], undocumented
