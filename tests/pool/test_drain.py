"""Quarantine-drain, stale markers, stuck units recovering by themselves, failing stages."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from gateway.client import RealtimeClient
from gateway.models.base import ChatMessage
from gateway.pipeline.messages import CallEnd
from gateway.pool.pool import UnitPool
from gateway.pool.unit import UnitState
from gateway.server.app import METRICS, POOL
from tests.doubles import BlockingLanguageModelDouble, FailingOnceLanguageModelDouble
from tests.helpers import serve, wait_until


def text_turn(client: RealtimeClient, text: str) -> None:
    client.send(
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        }
    )
    client.send({"type": "response.create"})


async def test_stale_marker_cannot_release_a_later_call(models, gateway_config):
    blocking = BlockingLanguageModelDouble()
    pool = UnitPool(dataclasses.replace(models, llm=blocking), gateway_config(drain_timeout_s=30))
    unit = pool.units[0]
    try:
        assert unit.claim("call-a", lambda e: None)
        assert unit.begin_drain("test")
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 5)

        assert unit.claim("call-b", lambda e: None)
        unit.create_response([ChatMessage("user", "hi")])
        assert await asyncio.to_thread(blocking.entered.wait, 5)  # the LLM thread is now hung
        assert unit.begin_drain("test")
        # A's marker turning up late — out of the last stage, or through the queues — changes nothing.
        unit._marker_out(CallEnd("call-a"))
        unit.chain.tts_in.put(CallEnd("call-a"))
        await asyncio.sleep(0.3)
        assert unit.state is UnitState.DRAINING
        blocking.release.set()  # B's own marker can now pass the LLM stage
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 5)
    finally:
        blocking.release.set()
        pool.close()


async def test_stuck_unit_is_quarantined_and_recovers_by_itself(models, gateway_config):
    blocking = BlockingLanguageModelDouble()
    config = gateway_config(drain_timeout_s=1.0)
    async with serve(config, dataclasses.replace(models, llm=blocking)) as (url, app):
        pool = app[POOL]
        seen: list[str] = []
        previous = pool.on_state_change
        pool.on_state_change = lambda unit: (seen.append(unit.state.value), previous(unit))
        client = RealtimeClient(url)
        await client.connect()
        text_turn(client, "Hello?")
        assert await asyncio.to_thread(blocking.entered.wait, 10)
        await client.hangup()
        assert await wait_until(lambda: pool.units[0].state is UnitState.IDLE, 10)
        assert "draining" in seen and "stuck" in seen and seen[-1] == "idle"
        assert pool.units[0].recoveries == 1 and pool.snapshot()["recoveries"] == 1
        assert "vg_unit_recoveries_total 1.0" in app[METRICS].render().decode()  # what DEPLOYMENT.md alerts on

        # The unit serves the next caller; the hung thread's late output never reaches it.
        second = RealtimeClient(url)
        assert await second.connect() == 201
        blocking.release.set()
        await asyncio.sleep(1.0)
        assert not [e for e in second.events if e["type"].startswith("response.")]
        assert not second.heard.voiced_times()
        await second.hangup()


async def test_failing_stage_reports_error_and_call_continues(models, gateway_config, caplog):
    failing = FailingOnceLanguageModelDouble(models.llm)
    async with serve(gateway_config(), dataclasses.replace(models, llm=failing)) as (url, app):
        client = RealtimeClient(url)
        await client.connect()
        text_turn(client, "Say hello.")
        error = await client.wait_for("error", timeout=30)
        assert error["error"]["code"] == "llm_failed" and "llm stage failed" in error["error"]["message"]
        failed = await client.wait_for("response.done", timeout=10)
        assert failed["response"]["status"] == "failed"
        # The exception's text (an internal URL, an upstream body) is the server log's, not the caller's.
        assert "simulated" not in json.dumps(client.events)
        assert "simulated model failure" in caplog.text

        mark = len(client.events)
        text_turn(client, "Say hello.")
        done = await client.wait_for("response.done", timeout=60, after=mark)
        assert done["response"]["status"] == "completed"
        await client.wait_for("output_audio_buffer.stopped", timeout=30, after=mark)
        assert client.heard.voiced_times()
        assert app[POOL].units[0].state is UnitState.ACTIVE
        await client.hangup()
