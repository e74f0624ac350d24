"""JSON a parser chokes on, from a client: arrays or objects nested thousands deep, an integer of
thousands of digits. ``json.loads`` raises ``RecursionError`` and a plain ``ValueError`` for them,
not ``JSONDecodeError``: one such event used to end the WebSocket session (and its unit's call)
with a traceback instead of an ``invalid_json`` error; a ``function_call`` item whose arguments
nest that deep made every later response of the session fail (``llm_failed``)."""

from __future__ import annotations

import json

import aiohttp
import pytest

from gateway.pool.unit import UnitState
from gateway.realtime.client_messages import MAX_NESTING, decode_client_message, nesting
from gateway.realtime.items import ClientError
from gateway.server.app import POOL
from gateway.server.runner import free_port
from tests.helpers import serve, server_errors
from tests.transports.websocket.ws_client import EventClient

DEEP = 100_000  # far past the parser's recursion limit (1000)


def nested_session(depth: int, leaf: str = "1") -> str:
    """A ``session.update`` whose session holds objects nested ``depth`` deep around ``leaf``."""
    return '{"type": "session.update", "session": ' + '{"a": ' * depth + leaf + "}" * depth + "}"


HOSTILE = {
    "deep list": "[" * DEEP + "]" * DEEP,
    "deep session": nested_session(DEEP),
    "huge integer": '{"type": "session.update", "event_id": ' + "1" * 5000 + "}",
    # parses, but walking it (the Unicode repair of its lone surrogate) ran out of stack
    "deep surrogate": '{"type": "x", "a": ' + "[" * 950 + '"\\ud800"' + "]" * 950 + "}",
}


@pytest.mark.parametrize("raw", HOSTILE.values(), ids=HOSTILE.keys())
def test_json_the_parser_chokes_on_is_invalid_json(raw: str):
    with pytest.raises(ClientError) as refused:
        decode_client_message(raw, max_bytes=1 << 20)
    assert refused.value.code == "invalid_json"


def test_nesting_is_counted_without_recursion_and_a_real_schema_passes():
    assert nesting({"type": "x"}) == 1 and nesting([]) == 1 and nesting("s") == 0
    assert nesting(json.loads("[" * 500 + "]" * 500)) == MAX_NESTING + 1  # stops one past the limit
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}}
    event = {"type": "session.update", "session": {"tools": [{"type": "function", "parameters": schema}]}}
    assert decode_client_message(json.dumps(event)) == event
    with pytest.raises(ClientError):
        decode_client_message(nested_session(MAX_NESTING))


async def test_choking_json_gets_an_error_and_the_websocket_session_goes_on(models, gateway_config):
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            for raw in HOSTILE.values():
                mark = len(client.events)
                await client.send_raw(raw)
                error = (await client.wait_for("error", after=mark, timeout=10))["error"]
                assert error["code"] == "invalid_json", error
            mark = len(client.events)
            await client.send("session.update", session={"instructions": "Still here."})
            updated = await client.wait_for("session.updated", after=mark, timeout=10)
            assert updated["session"]["instructions"] == "Still here."
            assert not server_errors(client.events)
            assert app[POOL].units[0].state is UnitState.ACTIVE


# The brackets are ~1 token each, all read into the prompt (~60 s at depth 3000 on a 2-core box, ~half that at 1200).
@pytest.mark.slow
async def test_a_call_item_with_arguments_nested_past_the_parser_does_not_fail_the_responses(models, gateway_config):
    tool = {"type": "function", "name": "lookup", "description": "Look a word up.", "parameters": {"type": "object"}}
    deep = "[" * 1200 + "]" * 1200  # within max_item_chars, past json.loads's recursion limit (1000 frames)
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", session={"tools": [tool], "output_modalities": ["text"]})
            await client.send(
                "conversation.item.create",
                item={"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": deep},
            )
            for _ in range(2):  # this response and the next one
                mark = len(client.events)
                await client.send("response.create", response={"max_output_tokens": 8, "tool_choice": "none"})
                done = (await client.wait_for("response.done", after=mark, timeout=60))["response"]
                assert done["status"] in ("completed", "incomplete"), done
            assert not server_errors(client.events)
            assert not [e for e in client.of_type("error") if e["error"]["code"].endswith("_failed")]


async def test_http_bodies_the_parser_chokes_on_get_400_invalid_json(models, gateway_config):
    """Every JSON body of the HTTP API (within its 64 KiB): nested past the parser's recursion
    limit it used to end in 500 ``server_error`` and a traceback in the log."""
    depth = 20_000  # 40 KB of brackets: under the body limit
    deep = "[" * depth + "]" * depth
    deep_session = '{"session": ' + deep + "}"
    offer = '{"type": "offer", "sdp": "v=0", "session": ' + deep + "}"
    config = gateway_config(sip_port=free_port(), sip_host="127.0.0.1")
    async with serve(config, models) as (url, _app), aiohttp.ClientSession() as http:
        json_type = {"Content-Type": "application/json"}
        form = aiohttp.FormData()
        form.add_field("sdp", "v=0", content_type="application/sdp")  # multipart, as the SDKs send it
        form.add_field("session", deep)
        requests = [
            ("/v1/realtime/client_secrets", {"data": deep_session, "headers": json_type}),
            ("/v1/realtime/client_secrets", {"data": '{"expires_after": {"seconds": ' + "1" * 5000 + "}}"}),
            ("/offer", {"data": offer, "headers": json_type}),
            ("/v1/realtime/calls", {"data": offer, "headers": json_type}),
            ("/v1/realtime/calls", {"data": form}),
            ("/v1/realtime/calls/sip_x/accept", {"data": deep_session, "headers": json_type}),
        ]
        for path, kwargs in requests:
            async with http.post(url + path, **kwargs) as response:
                body = await response.json()
                assert (response.status, body["error"]["code"]) == (400, "invalid_json"), (path, body)
        # A body over the limit is named as such, not as an SDP offer (client_secrets takes none).
        async with http.post(url + "/v1/realtime/client_secrets", data="x" * 200_000, headers=json_type) as response:
            message = (await response.json())["error"]["message"]
            assert response.status == 413 and "SDP" not in message, message
