"""Callers whose media is wrong: RTP of a payload type it never offered (dropped, the call goes
on), and no media at all (present by its RTCP, ended by the idle timeout, not as gone)."""

from __future__ import annotations

import asyncio

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL
from tests.helpers import serve, wait_until
from tests.telephony.peers import SuppressingMicrophone, dtls_transport


async def test_rtp_of_a_payload_type_never_offered_is_dropped(models, speech, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        transport = dtls_transport(client)
        send_rtp = transport._send_rtp
        rewritten = 0

        async def as_payload_type_99(data: bytes) -> None:
            nonlocal rewritten
            if len(data) > 12 and not 192 <= data[1] <= 223:  # RTP, not RTCP: PT 99, marker kept
                data = data[:1] + bytes([(data[1] & 0x80) | 99]) + data[2:]
                rewritten += 1
            await send_rtp(data)

        transport._send_rtp = as_payload_type_99  # type: ignore[method-assign]
        client.say(speech("Hello, can you hear me?"))
        await asyncio.sleep(3.0)
        assert rewritten > 50
        assert not client.of_type("input_audio_buffer.speech_started"), "audio of an unknown payload type was heard"
        assert not client.of_type("error")
        transport._send_rtp = send_rtp  # type: ignore[method-assign]
        mark = len(client.events)
        client.say(speech("What is the capital of France?"))
        await client.wait_for("input_audio_buffer.speech_started", timeout=15, after=mark)
        assert app[POOL].units[0].state is UnitState.ACTIVE
        await client.hangup()


async def test_caller_that_sends_no_media_is_present_until_idle(models, gateway_config):
    """No RTP ever (a muted bridge), but RTCP (aiortc's every 0.5..1.5 s): not gone after
    ``media_timeout_s``; the call ends by ``idle_timeout_s``, with the reason told."""
    async with serve(gateway_config(pool_size=1, media_timeout_s=2.5, idle_timeout_s=6.0), models) as (url, app):
        client = RealtimeClient(url)
        client.mic = SuppressingMicrophone()  # nothing queued: never sends RTP
        assert await client.connect() == 201
        error = await client.wait_for("error", timeout=12)
        assert error["error"]["code"] == "idle_timeout", error
        assert await wait_until(lambda: app[POOL].units[0].state is UnitState.IDLE, 10)
        await client.close()
