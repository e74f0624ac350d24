"""A caller that vanishes, and the call watchdogs (each with a short configured value)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np
from aiortc import RTCPeerConnection

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app import POOL
from tests.helpers import serve, wait_until
from tests.telephony.peers import go_quiet

ROOT = Path(__file__).resolve().parents[3]  # the repository: tests.transports... imports from there


async def test_killed_caller_is_drained_and_next_caller_hears_nothing_of_it(models, speech, gateway_config, tmp_path):
    speech_file = tmp_path / "question.npy"
    np.save(speech_file, speech("Tell me a long story about a brave little dragon."))
    config = gateway_config(media_timeout_s=2.0, max_response_tokens=80)
    async with serve(config, models) as (url, app):
        unit = app[POOL].units[0]
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.transports.webrtc.caller_process",
            url,
            str(speech_file),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            while True:
                line = (await asyncio.wait_for(child.stdout.readline(), 120)).decode()
                assert line, "caller process ended early"
                if line.startswith("PLAYING"):
                    break
            assert unit.state is UnitState.ACTIVE
            child.send_signal(signal.SIGKILL)  # mid-answer: no hang-up, no DTLS close
            await child.wait()
        finally:
            if child.returncode is None:
                child.kill()
        # Within the media timeout plus the drain (and a little slack for this 2-core machine).
        assert await wait_until(
            lambda: unit.state is UnitState.IDLE, config.media_timeout_s + config.drain_timeout_s + 2
        )
        assert unit.close_reason == "media_timeout"
        assert unit.recoveries == 0  # drained properly, not rebuilt

        # The next caller gets the same (only) unit and hears silence: nothing of the last answer.
        client = RealtimeClient(url)
        assert await client.connect() == 201
        await asyncio.sleep(3.0)
        assert client.heard.frames, "no audio frames at all"
        assert client.heard.voiced_times() == []
        assert not [e for e in client.events if e["type"].startswith(("response.", "output_audio_buffer."))]
        await client.hangup()


async def closed_with(client: RealtimeClient, code: str, timeout: float) -> dict:
    error = await client.wait_for("error", timeout=timeout)
    assert error["error"]["code"] == code, error
    return error


async def test_media_timeout_when_nothing_arrives(models, gateway_config):
    async with serve(gateway_config(media_timeout_s=1.5), models) as (url, app):
        client = RealtimeClient(url)
        await client.connect()
        # Nothing more comes from the caller: no RTP, no RTCP, no data (a caller that only stops
        # its RTP but still sends RTCP is present: tests/telephony, silence suppression).
        go_quiet(client)
        await closed_with(client, "media_timeout", timeout=6)
        assert await wait_until(lambda: app[POOL].units[0].state is UnitState.IDLE, 5)
        await client.close()


async def test_idle_timeout_closes_a_silent_call(models, gateway_config):
    async with serve(gateway_config(idle_timeout_s=1.5), models) as (url, app):
        client = RealtimeClient(url)
        await client.connect()
        started = time.monotonic()
        await closed_with(client, "idle_timeout", timeout=6)
        assert time.monotonic() - started >= 1.0
        assert await wait_until(lambda: app[POOL].units[0].state is UnitState.IDLE, 5)
        await client.close()


async def test_maximum_call_duration(models, gateway_config):
    async with serve(gateway_config(max_call_s=2.0), models) as (url, app):
        client = RealtimeClient(url)
        await client.connect()
        await closed_with(client, "max_duration", timeout=6)
        assert await wait_until(lambda: app[POOL].units[0].state is UnitState.IDLE, 5)
        await client.close()


async def test_connect_watchdog_releases_a_call_that_never_connects(models, gateway_config):
    async with serve(gateway_config(connect_timeout_s=1.0), models) as (url, app):
        pc = RTCPeerConnection()
        pc.addTransceiver("audio")
        await pc.setLocalDescription(await pc.createOffer())
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{url}/v1/realtime/calls", data=pc.localDescription.sdp, headers={"Content-Type": "application/sdp"}
            ) as response:
                assert response.status == 201
        # The answer is never applied: ICE never starts on our side.
        unit = app[POOL].units[0]
        assert unit.state is UnitState.ACTIVE
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 5)
        assert unit.close_reason == "connect_timeout"
        await pc.close()
