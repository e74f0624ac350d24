"""Graceful shutdown of a real gateway process: SIGTERM mid-answer lets the answer play to its end,
refuses new calls with 503 at once (``/healthz`` says ``draining``), tells the caller why the call
ends (``error`` code ``server_shutdown``) and exits 0 within the grace period; a second signal
exits at once."""

from __future__ import annotations

import asyncio
import signal
import time

import aiohttp
import pytest

from gateway.client import RealtimeClient
from tests.ops.services import start_gateway, wait_exit, wait_healthy

pytestmark = pytest.mark.slow

GRACE_S = 20
LONG_ANSWER = [
    "--instructions",
    "You are a storyteller. Always answer with at least four full sentences.",
    "--max-response-tokens",
    "40",
]


def voiced_seconds(client: RealtimeClient, since: float, until: float = float("inf")) -> float:
    return 0.02 * len([t for t in client.heard.voiced_times() if since <= t <= until])


async def test_sigterm_mid_answer_plays_it_out_refuses_new_calls_and_exits_0(tmp_path):
    gateway, url = start_gateway(tmp_path, "--pool-size", "2", "--shutdown-grace-s", str(GRACE_S), *LONG_ANSWER)
    client = RealtimeClient(url)
    try:
        await wait_healthy(gateway, url)
        assert await client.connect() == 201
        mark = client.ask("Tell me a story about a cat who finds a hat.")
        started = await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        await asyncio.sleep(0.3)  # the answer is being heard
        gateway.signal(signal.SIGTERM)
        signalled_at = time.monotonic()

        async with aiohttp.ClientSession() as http:
            await asyncio.sleep(0.3)
            async with http.get(f"{url}/healthz") as response:
                assert response.status == 503 and (await response.json())["status"] == "draining"
            # A new offer is refused at once (pool_size 2: a unit is idle, so it is the drain that refuses).
            async with http.post(
                f"{url}/v1/realtime/calls", data="v=0\r\n", headers={"Content-Type": "application/sdp"}
            ) as response:
                assert response.status == 503, await response.text()
                assert (await response.json())["error"]["code"] == "server_shutdown"
                assert int(response.headers["Retry-After"]) > 0

        stopped = await client.wait_for("output_audio_buffer.stopped", timeout=GRACE_S, after=mark)
        done = client.of_type("response.done", after=mark)
        assert done and done[-1]["response"]["status"] in ("completed", "incomplete"), done  # not cancelled
        stopped_at = client.time_of(stopped)
        assert stopped_at > signalled_at + 0.5, "the answer should still have been playing at SIGTERM"
        assert voiced_seconds(client, signalled_at, stopped_at + 0.3) >= 0.5, "the answer stopped at SIGTERM"
        assert voiced_seconds(client, client.time_of(started) - 0.2) >= 1.0

        error = await client.wait_for("error", timeout=10, after=mark)
        assert error["error"]["code"] == "server_shutdown", error
        assert client.time_of(error) >= stopped_at, "the call was ended before its answer finished"

        status = await wait_exit(gateway, GRACE_S + 10)
        assert status == 0, gateway.log[-3000:]
        assert time.monotonic() - signalled_at < GRACE_S + 5
        assert "drained in" in gateway.log, gateway.log[-2000:]
    finally:
        await client.close()
        gateway.stop()


async def test_a_second_signal_exits_at_once(tmp_path):
    gateway, url = start_gateway(tmp_path, "--pool-size", "1", "--shutdown-grace-s", "60", *LONG_ANSWER)
    client = RealtimeClient(url)
    try:
        await wait_healthy(gateway, url)
        assert await client.connect() == 201
        mark = client.ask("Tell me a story about a dog.")
        await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        gateway.signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        assert gateway.process.poll() is None, "the first signal should start a drain, not exit"
        gateway.signal(signal.SIGINT)
        status = await wait_exit(gateway, 5)
        assert status == 128 + signal.SIGINT, (status, gateway.log[-2000:])
    finally:
        await client.close()
        gateway.stop()
