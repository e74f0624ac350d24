"""Hostile input on the ``oai-events`` data channel: every bad message gets an ``error`` and the
call goes on; a flood is dropped with one ``rate_limit_exceeded``; text that is not valid Unicode
is repaired at the door (a lone surrogate used to make every later response fail, ``llm_failed``);
transcript deltas never carry U+FFFD."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import time

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.realtime.client_messages import ClientEventRate, RateVerdict, decode_client_message
from gateway.server.app_keys import POOL
from tests.helpers import serve, server_errors, wait_until


async def send_invalid_utf8_text(client: RealtimeClient, payload: bytes) -> None:
    """Send ``payload`` as a *text* message (SCTP PPID 51, WebRTC String) although it is not
    UTF-8: what a broken or hostile stack can do, and aiortc's own send never would."""
    channel = client.channel
    assert channel is not None
    transport = channel.transport
    channel._addBufferedAmount(len(payload))
    transport._data_channel_queue.append((channel, 51, payload))
    await transport._data_channel_flush()


def test_rate_limit_tells_a_flood_once():
    now = [0.0]
    rate = ClientEventRate(per_second=10, burst=5, tell_every_s=10, clock=lambda: now[0])
    verdicts = [rate.admit() for _ in range(50)]  # a flood, all at once
    assert verdicts[:5] == [RateVerdict.ACCEPT] * 5
    assert verdicts[5] is RateVerdict.REFUSE_AND_TELL and set(verdicts[6:]) == {RateVerdict.REFUSE}
    now[0] += 0.2  # two tokens back: the flood goes on at the rate, without another error
    assert [rate.admit() for _ in range(3)] == [RateVerdict.ACCEPT, RateVerdict.ACCEPT, RateVerdict.REFUSE]
    now[0] += 10.0  # a later flood is told again
    assert [rate.admit() for _ in range(6)][-1] is RateVerdict.REFUSE_AND_TELL
    assert rate.refused == 47


def test_lone_surrogates_are_repaired_at_the_door():
    event = decode_client_message('{"type": "x", "item": {"text": "a\\ud800b", "ok": "\\ud83d\\ude00"}}')
    assert event["item"] == {"text": "a\ufffdb", "ok": "\U0001f600"}
    json.dumps(event).encode("utf-8")  # encodes: nothing invalid is left


async def test_bad_messages_get_errors_and_the_call_goes_on(models, gateway_config):
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        bad = [
            "{not json",
            "[1, 2, 3]",
            '"just a string"',
            json.dumps({"type": "no.such.event"}),
            json.dumps({"type": 42}),
            json.dumps({"type": "session.update", "session": "not an object"}),
            json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(os.urandom(3000)).decode()}),
            json.dumps({"type": "input_audio_buffer.append", "audio": "%%% not base64 %%%"}),
            json.dumps(
                {
                    "type": "conversation.item.create",
                    "item": {"type": "message", "role": "user", "content": "x" * 150_000},
                }
            ),  # > 128 KiB
        ]
        mark = len(client.events)
        for text in bad:
            client.send_raw(text)
        client.channel.send(os.urandom(64))  # binary, not UTF-8
        await send_invalid_utf8_text(client, b'{"type": "\xff\xfe"}')
        errors = [await client.wait_for("error", timeout=10, after=mark, count=n) for n in range(1, len(bad) + 3)]
        codes = [error["error"]["code"] for error in errors]
        assert "invalid_json" in codes and "invalid_event" in codes and "message_too_large" in codes, codes
        assert all(error["error"].get("message") for error in errors)
        assert not server_errors(errors), errors  # each is the client's fault, not a handler that raised
        # Still answered, on the same call:
        done = await client.wait_for("response.done", timeout=60, after=client.ask("Say hello."))
        assert done["response"]["status"] in ("completed", "incomplete"), done
        assert not server_errors(client.events)
        assert app[POOL].units[0].state is UnitState.ACTIVE
        await client.hangup()


async def test_flood_is_dropped_with_one_error(models, gateway_config):
    """5000 events at once: one ``rate_limit_exceeded`` per 10 s of flood (on a loaded machine the
    flood itself can take longer than that to cross aiortc's SCTP, and then a second error is due),
    and only the token bucket's share answered (burst 200, then 100 a second)."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        mark = len(client.events)
        clear = json.dumps({"type": "input_audio_buffer.clear"})
        started = time.monotonic()
        for _ in range(5000):  # thousands of events at once
            client.send_raw(clear)
        await client.wait_for("error", timeout=20, after=mark)
        assert await wait_until(lambda: client.channel.bufferedAmount == 0, 60)  # all of it sent
        await asyncio.sleep(1.0)
        flood_s = time.monotonic() - started
        limited = [
            at
            for event, at in zip(client.events[mark:], client.event_times[mark:], strict=True)
            if event["type"] == "error" and event["error"]["code"] == "rate_limit_exceeded"
        ]
        assert 1 <= len(limited) <= 1 + int(flood_s // 10), (limited, flood_s)
        gaps = [later - earlier for earlier, later in itertools.pairwise(limited)]
        assert all(gap >= 5.0 for gap in gaps), f"errors closer than one per flood window: {gaps}"
        answered = len(client.of_type("input_audio_buffer.cleared", after=mark))
        # The bucket's share of the time the flood took, and in any case most of the 5000 dropped.
        assert answered <= min(4000, 300 + 100 * flood_s), (answered, flood_s)
        assert not server_errors(client.events)
        await asyncio.sleep(2.5)  # quiet: the bucket is full again
        again = len(client.events)
        client.send_raw(clear)
        await client.wait_for("input_audio_buffer.cleared", timeout=5, after=again)
        assert app[POOL].units[0].state is UnitState.ACTIVE
        await client.hangup()


async def test_lone_surrogate_does_not_break_later_responses_and_deltas_have_no_fffd(models, gateway_config):
    """A user item with a lone surrogate (``\\ud800`` in the JSON) used to make the LLM stage fail
    on this and every later response of the session. Replies with multi-byte characters must not
    stream U+FFFD from a character split across tokens."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        client.send_raw(
            '{"type": "conversation.item.create", "item": {"type": "message", "role": "user", '
            '"content": [{"type": "input_text", "text": "Hello \\ud800 there, say hi."}]}}'
        )
        mark = len(client.events)
        client.send({"type": "response.create"})
        for question in (None, "Write the words café, naïve and 日本語, then a smiley emoji."):
            if question is not None:
                mark = client.ask(question)
            done = await client.wait_for("response.done", timeout=60, after=mark)
            assert done["response"]["status"] in ("completed", "incomplete"), done["response"]
            failed = [e for e in client.of_type("error", after=mark) if e["error"]["code"].endswith("_failed")]
            assert not failed, failed
        deltas = [e.get("delta", "") for e in client.events if e["type"].endswith(("transcript.delta", "text.delta"))]
        assert deltas and not any("\ufffd" in delta for delta in deltas), deltas
        # The multi-byte characters asked for came back whole, in the deltas and in the item.
        reply = "".join(e["delta"] for e in client.of_type("response.output_audio_transcript.delta", after=mark))
        asked = ("café", "naïve", "日本語")
        assert any(word in reply for word in asked), reply
        final = client.of_type("response.output_audio_transcript.done", after=mark)[-1]["transcript"]
        assert final.strip() == reply.strip(), (final, reply)
        assert not server_errors(client.events)
        await client.hangup()
        assert await wait_until(lambda: app[POOL].units[0].state is UnitState.IDLE, 10)
