"""A conversation item is kept as sent and echoed (``conversation.item.added``, ``.done``, and each
``conversation.item.retrieve``); only its text was bounded (``max_item_chars``). A 6 MB
``input_audio`` part (its audio is never transcribed here) or any extra field was stored whole:
20 retrieves of 60 bytes each were answered with 138 MB. The whole item is now bounded too
(``SessionLimits.max_item_bytes``); an item whose text is at the limit still fits."""

from __future__ import annotations

from tests.helpers import serve, server_errors
from tests.transports.websocket.ws_client import EventClient


def user_item(**part) -> dict:
    return {"type": "message", "role": "user", "content": [part]}


async def test_an_item_larger_than_its_text_allows_is_refused_and_one_at_the_text_limit_kept(models, gateway_config):
    async with serve(gateway_config(max_item_chars=32_768), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            refused = [
                user_item(type="input_audio", audio="A" * (6 * 1024 * 1024)),
                user_item(type="input_text", text="Hi.", padding="x" * 300_000),
                {**user_item(type="input_text", text="Hi."), "padding": ["x" * 1000] * 300},
            ]
            for item in refused:
                mark = len(client.events)
                await client.send("conversation.item.create", item=item)
                error = (await client.wait_for("error", after=mark, timeout=10))["error"]
                assert (error["code"], error["param"]) == ("limit_exceeded", "item"), error
                assert "input_audio_buffer.append" in error["message"]
                assert not client.of_type("conversation.item.added", after=mark)
            mark = len(client.events)
            await client.send("conversation.item.create", item=user_item(type="input_text", text="\U0001f600" * 32_768))
            added = await client.wait_for("conversation.item.added", after=mark, timeout=10)
            assert added["item"]["content"][0]["text"] == "\U0001f600" * 32_768
            assert not server_errors(client.events)
