"""``conversation.item.truncate`` of a reply that is still being generated or played.

OpenAI generates a reply faster than real time, so a client's truncate (its playback stopped at
``audio_end_ms``) usually lands after ``response.done``. The gateway paces a reply in real time, so
the same truncate lands mid-reply: the OpenAI Agents SDK's ``interrupt()`` sends it before its
``response.cancel`` (and alone when server VAD cancels by itself). The truncate was acknowledged
(``conversation.item.truncated``), but the reply then went on, and the words the caller never heard
came back into the item: the cancel's own estimate of what was heard, or on ``response.done`` the
whole reply, which the next prompt then held (OpenAI: truncating "delete[s] the server-side text
transcript to ensure there is not text in the context that hasn't been heard by the user").

A truncate of the item of a reply still generating, or whose audio is still queued or playing, now
stops that reply first, as ``response.cancel`` does (``cancelled``, ``client_cancelled``), then cuts
the item at ``audio_end_ms``; the one cancel that follows is answered with nothing (the reply is
cancelled already), as OpenAI's cancel of a reply going on is. The harness rows run without
models; the WebSocket one with the real models.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import serve, server_errors
from tests.realtime.harness import (
    Harness,
    answer_still_playing,
    client,
    finished,
    playback_stopped,
    said,
    speaking,
)
from tests.transports.websocket.ws_client import EventClient


def _truncate(h: Harness, audio_end_ms: int) -> dict:
    return client(
        "conversation.item.truncate", item_id=h.rt.items[-1]["id"], content_index=0, audio_end_ms=audio_end_ms
    )


def _types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def test_a_truncate_then_a_cancel_mid_reply_keeps_only_the_words_before_the_cut() -> None:
    """The Agents SDK's interrupt: truncate (nothing heard), then response.cancel."""
    h = Harness()
    speaking(h)  # "Paris is the capital." generating; 600 ms played, "Paris" heard
    sent = h.run(_truncate(h, 0))
    cancel = h.run(client("response.cancel"))
    assert h.rt.items[-1]["content"][0]["transcript"] == ""
    assert "conversation.item.truncated" in _types(sent)
    assert ("response.done", "cancelled") in [(e["type"], e.get("response", {}).get("status")) for e in sent]
    assert cancel == []  # cancelled already: no response_cancel_not_active (OpenAI cancels it then)
    second = h.run(client("response.cancel"))
    assert [e["error"]["code"] for e in second if e["type"] == "error"] == ["response_cancel_not_active"]


def test_a_truncate_alone_mid_reply_ends_the_reply_and_its_late_words_stay_out() -> None:
    """Server VAD cancels by itself, so the SDK sends the truncate alone: the reply stops there."""
    h = Harness()
    speaking(h)
    h.run(_truncate(h, 300))  # half of the 600 ms played: not even "Paris" whole
    h.run(said(" It is a city of art."))  # late pipeline events of the stopped reply
    h.run(finished("Paris is the capital. It is a city of art."))
    assert h.rt.items[-1]["content"][0]["transcript"] == ""
    assert h.rt.items[-1]["status"] == "incomplete"
    assert "interrupt" in h.pipeline.calls
    assert h.last("response.done")["response"]["status_details"]["reason"] == "client_cancelled"


def test_a_truncate_while_the_finished_reply_still_plays_stops_its_audio() -> None:
    """WebRTC: the reply is generated, its audio plays on: the truncate cuts it off there."""
    h = Harness()
    answer_still_playing(h)  # "Paris is the capital." done; 600 ms played, "Paris" heard
    sent = h.run(_truncate(h, 600))
    h.run(playback_stopped(1500))
    assert h.rt.items[-1]["content"][0]["transcript"] == "Paris"
    assert _types(sent) == ["output_audio_buffer.cleared", "conversation.item.truncated"]


def test_an_invalid_truncate_mid_reply_leaves_the_reply_going() -> None:
    h = Harness()
    speaking(h)
    errors = h.run(client("conversation.item.truncate", item_id=h.rt.items[-1]["id"], content_index=1, audio_end_ms=0))
    assert _types(errors) == ["error"]
    assert "interrupt" not in h.pipeline.calls
    h.run(finished())
    assert h.last("response.done")["response"]["status"] == "completed"


@pytest.mark.slow  # real model turns
async def test_a_websocket_reply_truncated_mid_reply_keeps_only_what_was_heard(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as c:
            await c.wait_for("session.created", timeout=10)
            for cancel in (True, False):
                mark = await c.ask("Tell me a long story about a cat who sails across the sea.", max_output_tokens=80)
                await c.wait_for("response.output_audio_transcript.delta", after=mark, count=3, timeout=60)
                await asyncio.sleep(1.0)  # words played by the gateway's clock: the client heard none
                item_id = c.of_type("response.output_item.added", after=mark)[-1]["item"]["id"]
                await c.send("conversation.item.truncate", item_id=item_id, content_index=0, audio_end_ms=0)
                if cancel:
                    await c.send("response.cancel")
                done = await c.wait_for("response.done", after=mark, timeout=10)
                assert done["response"]["status"] == "cancelled", done
                await asyncio.sleep(0.5)  # late audio of the reply, if any, and the cancel's answer
                last = len(c.events)
                await c.send("conversation.item.retrieve", item_id=item_id)
                item = (await c.wait_for("conversation.item.retrieved", after=last, timeout=10))["item"]
                assert item["content"][0]["transcript"] == "", item
                assert c.error_codes(mark) == []
            assert not server_errors(c.events)
