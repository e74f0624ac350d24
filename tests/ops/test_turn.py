"""TURN through a real coturn: the gateway takes its ICE servers from ``ice_servers`` (RTCIceServer
JSON), and a caller that may use relay candidates only (``iceTransportPolicy`` relay, as a browser
behind a strict firewall is set up) completes a spoken turn; coturn's own log shows the allocation,
the permission and channel for the gateway, and the bytes it relayed."""

from __future__ import annotations

import json
import re

import pytest
from aiortc import RTCConfiguration, RTCIceServer
from aiortc.rtcconfiguration import RTCIceTransportPolicy

from gateway.client import RealtimeClient
from tests.helpers import QUESTION, says, serve, wait_until
from tests.ops.services import TURN_PASSWORD, TURN_USER, start_coturn, wait_for_log

pytestmark = pytest.mark.slow


def relayed_bytes(log: str) -> int:
    """Bytes coturn relayed for the test user's allocations: the sum of ``rb`` and ``sb`` (received
    and sent bytes) of its ``peer usage`` lines (coturn writes one per session, periodically and at
    its end); each line's counts are totals so far, so the largest per session counts."""
    best: dict[str, int] = {}
    for line in log.splitlines():
        match = re.search(
            r"session (\d+): peer usage: realm=<[^>]*>, username=<([^>]*)>, rp=\d+, rb=(\d+), "
            r"sp=\d+, sb=(\d+)",
            line,
        )
        if match and match.group(2) == TURN_USER:
            best[match.group(1)] = max(best.get(match.group(1), 0), int(match.group(3)) + int(match.group(4)))
    return sum(best.values())


async def test_relay_only_caller_completes_a_spoken_turn_through_coturn(tmp_path, models, speech, gateway_config):
    coturn, turn_port = start_coturn(tmp_path)
    client = None
    try:
        assert await wait_for_log(coturn, "UDP listener opened on"), coturn.log
        turn_url = f"turn:127.0.0.1:{turn_port}"
        servers = json.dumps([{"urls": [turn_url], "username": TURN_USER, "credential": TURN_PASSWORD}])
        async with serve(gateway_config(pool_size=1, ice_servers=servers), models) as (url, _app):
            relay_only = RTCConfiguration(
                iceServers=[RTCIceServer(turn_url, TURN_USER, TURN_PASSWORD)],
                iceTransportPolicy=RTCIceTransportPolicy.RELAY,
            )
            client = RealtimeClient(url, configuration=relay_only)
            assert await client.connect() == 201
            offered = client.pc.localDescription.sdp
            candidates = [line for line in offered.splitlines() if line.startswith("a=candidate:")]
            assert candidates and all(" typ relay" in line for line in candidates), candidates

            mark = len(client.events)
            client.say(speech(QUESTION))
            transcript = await client.wait_for(
                "conversation.item.input_audio_transcription.completed", timeout=60, after=mark
            )
            assert says(transcript["transcript"], QUESTION), transcript
            await client.wait_for("response.done", timeout=60, after=mark)
            await client.wait_for("output_audio_buffer.stopped", timeout=60, after=mark)
            started = client.of_type("output_audio_buffer.started", after=mark)
            heard = [t for t in client.heard.voiced_times() if t >= client.time_of(started[0]) - 0.2]
            assert len(heard) * 0.02 >= 0.5, "less than 0.5 s of the answer arrived through the relay"
            await client.hangup()
            client = None

        log = coturn.log
        assert re.search(r"ALLOCATE processed, success", log), log[-3000:]
        assert re.search(r"(CREATE_PERMISSION|CHANNEL_BIND) processed, success", log), log[-3000:]
        # The allocation closes with the peer connection; coturn then logs the session's usage.
        assert await wait_until(lambda: relayed_bytes(coturn.log) > 0, timeout=10), coturn.log[-3000:]
        # Seconds of Opus each way (the question, the answer) went through the relay, not a few STUN checks.
        assert relayed_bytes(coturn.log) > 20_000, coturn.log[-3000:]
    finally:
        if client is not None:
            await client.close()
        coturn.stop()
