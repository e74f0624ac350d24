"""DTMF (RFC 4733 ``telephone-event``): negotiated in the answer, one key press per event despite
the repeated packets, reported as ``input_audio_buffer.dtmf_event_received``; optionally a key
press barges in and is handed to the LLM as user text."""

from __future__ import annotations

import asyncio
import re
import struct

import pytest
from aiortc import RTCSessionDescription

from gateway.client import RealtimeClient
from gateway.media.dtmf import KeyPressDetector, parse_telephone_event
from gateway.server.app_keys import SESSIONS
from tests.helpers import serve
from tests.telephony.peers import KeyPad, add_telephone_event


def block(event: int, end: bool, duration: int) -> bytes:
    return struct.pack("!BBH", event, (0x80 if end else 0) | 10, duration)


def test_one_key_press_per_event():
    detector = KeyPressDetector()
    presses = []
    # "5": start, two updates, three end packets, all with timestamp 1000.
    for payload in [block(5, False, 400), block(5, False, 800), block(5, False, 1200)] + [block(5, True, 1600)] * 3:
        presses.append(detector.packet(1, 1000, payload, 8000))
    # "#" with its start lost: only the end packets arrive.
    presses += [detector.packet(1, 5000, block(11, True, 960), 8000) for _ in range(3)]
    # A long "0", cut into two segments (RFC 4733 2.5.1.3): the second starts where the first ended.
    presses.append(detector.packet(1, 10000, block(0, False, 65535), 8000))
    presses.append(detector.packet(1, 10000 + 65535, block(0, True, 800), 8000))
    # Not a digit (event 16, flash), and a payload too short to read.
    presses.append(detector.packet(1, 90000, block(16, True, 800), 8000))
    presses.append(detector.packet(1, 95000, b"\x01", 8000))
    digits = [press.digit for press in presses if press is not None]
    assert digits == ["5", "#", "0"]
    assert detector.packets == 13 and detector.malformed == 1
    assert parse_telephone_event(block(15, True, 320)).digit == "D"


def dtmf_client(url: str) -> RealtimeClient:
    """A PCMU caller with a data channel that offers ``telephone-event/8000`` as payload type 101."""
    client = RealtimeClient(url, codec="PCMU")
    create_offer = client.pc.createOffer

    async def offer_with_telephone_event() -> RTCSessionDescription:
        offer = await create_offer()
        return RTCSessionDescription(sdp=add_telephone_event(offer.sdp), type="offer")

    client.pc.createOffer = offer_with_telephone_event  # type: ignore[method-assign]
    return client


async def test_key_presses_are_reported_once_each(models, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = dtmf_client(url)
        assert await client.connect() == 201
        answer = client.pc.remoteDescription.sdp
        assert re.search(r"^m=audio \d+ \S+ 0 101", answer, re.M), answer
        assert "a=rtpmap:101 telephone-event/8000" in answer and "a=fmtp:101 0-15" in answer
        pad = KeyPad(client)
        await pad.press("1#5")
        await client.wait_for("input_audio_buffer.dtmf_event_received", timeout=5, count=3)
        await asyncio.sleep(0.3)  # any duplicate would have arrived by now
        events = client.of_type("input_audio_buffer.dtmf_event_received")
        assert [event["event"] for event in events] == ["1", "#", "5"], events
        assert all(isinstance(event["received_at"], int) for event in events)
        assert pad.packets_sent >= 3 * 5  # each press: start, updates, three ends
        call = app[SESSIONS].sessions[client.call_id]
        assert call.key_presses == ["1", "#", "5"]
        await client.hangup()


@pytest.mark.slow
async def test_key_press_barges_in_and_reaches_the_llm(models, gateway_config):
    config = gateway_config(pool_size=1, dtmf_barge_in=True, dtmf_to_llm=True, max_response_tokens=80)
    async with serve(config, models) as (url, app):
        client = dtmf_client(url)
        assert await client.connect() == 201
        mark = client.ask("Tell me a long story about a lighthouse keeper.")
        await client.wait_for("output_audio_buffer.started", timeout=60, after=mark)
        press_mark = len(client.events)
        await KeyPad(client).press("5")
        await client.wait_for("input_audio_buffer.dtmf_event_received", timeout=5, after=press_mark)
        first = await client.wait_for("response.done", timeout=30, after=mark)
        assert first["response"]["status"] == "cancelled", first["response"]
        second = await client.wait_for("response.done", timeout=90, after=press_mark, count=2)
        assert second["response"]["status"] in ("completed", "incomplete"), second["response"]
        texts = [
            part.get("text", "")
            for item in app[SESSIONS].sessions[client.call_id].realtime.items
            for part in item.get("content", [])
        ]
        assert "I pressed 5 on my keypad." in texts
        await client.hangup()
