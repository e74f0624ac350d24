"""What a client may not do to a call's control surfaces, answered as a production gateway should.

- ``output_audio_buffer.clear`` over the Realtime WebSocket: OpenAI documents the
  ``output_audio_buffer.*`` client events as WebRTC/SIP only (the server plays the audio there; over
  a WebSocket the client does). It was taken silently and cancelled the reply; it is refused now
  (``unsupported_event``), as ``input_audio_buffer.append`` is over WebRTC, and the reply goes on.
- Sidebands (``GET /v1/realtime?call_id=``): behind the trusted nginx every one comes from one
  address, so the per-source connection cap did not count them, and each has its own event rate: a
  call could have any number attached. One call now has at most ``max_sidebands_per_call``; the
  next is ``429 too_many_sidebands`` before the upgrade, and a closed one frees its place.
- ``POST /v1/realtime/calls/{id}/hangup`` sent several times at once: each got 200 (the call was
  still listed while its first hang-up ran); one after the other, the first got 200 and the rest 404.
  At once now answers as one after the other: exactly one 200.
- ``conversation.item.delete`` of the item of a reply going on (OpenAI: it removes the item) stops
  that reply first (``tests/realtime/test_delete_during_reply.py`` for the protocol rows); here over
  a real WebSocket with a real model turn.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from gateway.client import RealtimeClient
from tests.helpers import serve, server_errors
from tests.transports.websocket.ws_client import EventClient


async def test_output_audio_buffer_clear_over_a_websocket_is_refused(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as c:
            await c.wait_for("session.created", timeout=10)
            await c.send("output_audio_buffer.clear", event_id="evt_clear")
            error = (await c.wait_for("error", timeout=5))["error"]
            assert (error["code"], error["param"], error.get("event_id")) == ("unsupported_event", "type", "evt_clear")
            assert "WebSocket" in error["message"]


@pytest.mark.slow  # a WebRTC call and several sidebands (~2 s)
async def test_a_call_has_at_most_max_sidebands_per_call_attached(models, gateway_config):
    async with serve(gateway_config(max_sidebands_per_call=2), models) as (url, _app):
        caller = RealtimeClient(url, gateway_events=())
        assert await caller.connect() == 201
        query = f"?call_id={caller.call_id}"
        try:
            # Four at once from one address (loopback: no per-source limit, as behind nginx).
            sockets = [EventClient(url, query=query) for _ in range(4)]
            opened = await asyncio.gather(*(s.open() for s in sockets), return_exceptions=True)
            results = list(zip(sockets, opened, strict=True))
            refused = [(s, r) for s, r in results if isinstance(r, aiohttp.WSServerHandshakeError)]
            attached = [s for s, r in results if r is None]
            assert (len(attached), len(refused)) == (2, 2), opened
            for socket, error in refused:
                assert error.status == 429
                body = json.loads(socket.refusal_body or "{}")["error"]
                assert (body["code"], body["param"]) == ("too_many_sidebands", "call_id"), body
                assert "max_sidebands_per_call 2" in body["message"]
            # A closed sideband frees its place; the call goes on.
            await attached[0].close()
            await asyncio.sleep(0.2)
            async with EventClient(url, query=query) as again:
                await again.send("session.update", session={"instructions": "Be brief."})
                await again.wait_for("session.updated", timeout=10)
            await attached[1].close()
        finally:
            await caller.hangup()


@pytest.mark.slow  # a real model turn
async def test_over_a_websocket_clear_is_refused_and_delete_of_the_reply_item_stops_it(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as c:
            await c.wait_for("session.created", timeout=10)
            mark = await c.ask("Tell me a long story about a cat who sails across the sea.", max_output_tokens=80)
            await c.wait_for("response.output_audio_transcript.delta", after=mark, count=2, timeout=60)
            await c.send("output_audio_buffer.clear")
            assert (await c.wait_for("error", after=mark, timeout=5))["error"]["code"] == "unsupported_event"
            await asyncio.sleep(0.3)
            assert not c.of_type("response.done", after=mark)  # the reply goes on
            item_id = c.of_type("response.output_item.added", after=mark)[-1]["item"]["id"]
            await c.send("conversation.item.delete", item_id=item_id)
            done = await c.wait_for("response.done", after=mark, timeout=10)
            assert done["response"]["status"] == "cancelled", done
            assert done["response"]["status_details"]["reason"] == "client_cancelled"
            await c.wait_for("conversation.item.deleted", after=mark, timeout=5)
            deleted_at = next(i for i, e in enumerate(c.events) if e["type"] == "conversation.item.deleted")
            await asyncio.sleep(1.0)  # late words or audio of the stopped reply, if any
            late = [e for e in c.events[deleted_at + 1 :] if e.get("item_id") == item_id]
            assert late == [], late
            assert c.error_codes(mark) == ["unsupported_event"]
            assert not server_errors(c.events)


async def test_concurrent_hangups_of_one_call_answer_200_once(models, gateway_config):
    async with serve(gateway_config(), models) as (url, app):
        from gateway.server.app_keys import SESSIONS

        async with EventClient(url) as c:
            await c.wait_for("session.created", timeout=10)
            (call_id,) = list(app[SESSIONS].sessions)
            async with aiohttp.ClientSession() as http:

                async def hangup() -> int:
                    async with http.post(f"{url}/v1/realtime/calls/{call_id}/hangup") as response:
                        await response.read()
                        return response.status

                statuses = await asyncio.gather(*(hangup() for _ in range(5)))
                assert sorted(statuses) == [200, 404, 404, 404, 404], statuses
                assert await hangup() == 404  # and after it, as before
            await asyncio.wait_for(c.closed.wait(), 10)
