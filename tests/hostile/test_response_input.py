"""``response.input`` as an amplifier: an ``item_reference`` is ~40 bytes of the event and stands for
the referenced item's whole text in the prompt built from it. 100 000 references to one 32 KB item
(3.8 MB of JSON, under the 8 MB event limit) made ~3 GB of prompt text on the event loop before
the prompt was cut to ``max_prompt_chars`` (measured: 5 000 of them, +153 MB and 0.13 s). A
response's input now holds at most ``max_conversation_items`` entries (no more than a conversation
can): past that, an ``array_above_max_length`` error naming ``response.input``; the session goes on."""

from __future__ import annotations

from tests.helpers import serve, server_errors
from tests.transports.websocket.ws_client import EventClient

BIG = {
    "id": "big",
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "a " * 8000}, {"type": "input_text", "text": "b " * 8000}],
}


async def test_a_response_input_of_thousands_of_references_is_refused_and_the_session_goes_on(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("conversation.item.create", item=BIG)
            await client.wait_for("conversation.item.done", timeout=10)
            mark = len(client.events)
            references = [{"type": "item_reference", "id": "big"}] * 2000  # past the 512 items a conversation holds
            response = {"conversation": "none", "output_modalities": ["text"], "max_output_tokens": 1}
            await client.send("response.create", response={**response, "input": references})
            error = (await client.wait_for("error", after=mark, timeout=10))["error"]
            assert (error["code"], error["param"]) == ("array_above_max_length", "response.input"), error
            assert "512" in error["message"]
            assert not client.of_type("response.created", after=mark)
            # the session goes on
            await client.send("conversation.item.retrieve", item_id="big")
            retrieved = await client.wait_for("conversation.item.retrieved", after=mark, timeout=10)
            assert retrieved["item"]["id"] == "big"
            assert not server_errors(client.events)
