"""``response.metadata`` is echoed in ``response.created`` and ``response.done``: any size was
taken, so a client sending 7 MB of it in one event was sent 14 MB back. It is now held to OpenAI's
Metadata contract (16 string pairs, keys up to 64 characters, values up to 512); a valid one is
echoed as before."""

from __future__ import annotations

from tests.helpers import serve, server_errors
from tests.transports.websocket.ws_client import EventClient


def response(metadata: object) -> dict:
    return {
        "conversation": "none",
        "output_modalities": ["text"],
        "max_output_tokens": 4,
        "metadata": metadata,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi."}]}],
    }


async def test_metadata_beyond_openais_limits_is_refused_and_a_valid_one_echoed(models, gateway_config):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            refused = [
                ({f"k{i}": "v" * 500 for i in range(100)}, "invalid_value"),  # 100 pairs, 51 KB
                ({"k": "v" * 513}, "string_above_max_length"),
                ({"k" * 65: "v"}, "string_above_max_length"),
                ({"k": {"nested": "object"}}, "invalid_type"),
                (["not", "an", "object"], "invalid_type"),
            ]
            for metadata, code in refused:
                mark = len(client.events)
                await client.send("response.create", response=response(metadata))
                error = (await client.wait_for("error", after=mark, timeout=10))["error"]
                assert (error["code"], error["param"]) == (code, "response.metadata"), error
                assert not client.of_type("response.created", after=mark)
            mark = len(client.events)
            valid = {f"k{i}": "v" * 512 for i in range(16)}
            await client.send("response.create", response=response(valid))
            created = await client.wait_for("response.created", after=mark, timeout=10)
            assert created["response"]["metadata"] == valid
            done = await client.wait_for("response.done", after=mark, timeout=60)
            assert done["response"]["metadata"] == valid
            assert not server_errors(client.events)
