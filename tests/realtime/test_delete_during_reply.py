"""``conversation.item.delete`` of the assistant item of a reply still being generated or played.

OpenAI documents the delete as removing any item from the conversation history
(``conversation.item.deleted``; an error only when there is no such item): it says nothing of a
reply still going on into that item. Here the item was removed but its reply ran on: its words kept
coming (deltas naming an item that no longer exists), its audio kept playing, and ``response.done``
reported it ``completed``. A voice gateway cannot go on speaking an item the client removed, so the
reply now stops first, as for a truncate (``cancelled``, ``client_cancelled``, its audio cleared),
then the item is deleted. The harness rows run without models.
"""

from __future__ import annotations

from tests.realtime.harness import (
    Harness,
    answer_still_playing,
    client,
    finished,
    said,
    speaking,
)


def _delete(h: Harness, item_id: str | None = None) -> list[dict]:
    return h.run(client("conversation.item.delete", item_id=item_id or h.rt.items[-1]["id"]))


def _types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def test_deleting_the_item_of_a_reply_being_generated_cancels_the_reply_then_deletes_it() -> None:
    h = Harness()
    speaking(h)  # "Paris is the capital." generating; 600 ms played
    item_id = h.rt.items[-1]["id"]
    sent = _delete(h)
    assert "interrupt" in h.pipeline.calls  # the pipeline stops generating and playing it
    done = [e for e in sent if e["type"] == "response.done"]
    assert [d["response"]["status"] for d in done] == ["cancelled"], _types(sent)
    assert done[0]["response"]["status_details"]["reason"] == "client_cancelled"
    assert _types(sent)[-1] == "conversation.item.deleted"
    assert item_id not in [item["id"] for item in h.rt.items]
    late = h.run(said(" It is a city of art.")) + h.run(finished("Paris is the capital. It is a city of art."))
    assert not [e for e in late if e.get("item_id") == item_id or e["type"] == "response.done"], late
    assert h.rt.responses.active() is None


def test_deleting_the_item_of_a_finished_reply_still_playing_stops_its_audio() -> None:
    """WebRTC: the reply is generated, its audio plays on; deleting the item cuts it off."""
    h = Harness()
    answer_still_playing(h)
    sent = _delete(h)
    assert _types(sent) == ["output_audio_buffer.cleared", "conversation.item.deleted"]


def test_deleting_an_unknown_item_mid_reply_leaves_the_reply_going() -> None:
    h = Harness()
    speaking(h)
    errors = _delete(h, "item_nosuchitem")
    assert [e["error"]["code"] for e in errors if e["type"] == "error"] == ["item_not_found"]
    assert "interrupt" not in h.pipeline.calls
    h.run(finished())
    assert h.last("response.done")["response"]["status"] == "completed"


def test_deleting_the_callers_item_mid_reply_leaves_the_reply_going() -> None:
    h = Harness()
    speaking(h)
    user_item = next(item for item in h.rt.items if item.get("role") == "user")
    assert _types(_delete(h, user_item["id"])) == ["conversation.item.deleted"]
    h.run(finished())
    assert h.last("response.done")["response"]["status"] == "completed"
