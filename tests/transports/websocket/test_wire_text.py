"""Realtime events as text on a real WebSocket (loopback): what a client's numbers that are not
finite get, and how non-ASCII and lone surrogates travel (``gateway.realtime.wire``). The frames
are checked as they came (``frames``), not only as ``json.loads`` reads them."""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest

from tests.helpers import app_idle, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

# Latin with diacritics (2 bytes each in UTF-8), CJK (3), an emoji outside the BMP (4).
WORDS = "Grüße aus Köln, 日本語で話して 😀"


@pytest.fixture
def frames(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text frame the test's WebSocket clients receive, as it came."""
    seen: list[str] = []
    receive = aiohttp.ClientWebSocketResponse.receive

    async def keeping(self: aiohttp.ClientWebSocketResponse, timeout: float | None = None) -> aiohttp.WSMessage:
        message = await receive(self, timeout)
        if message.type is aiohttp.WSMsgType.TEXT:
            seen.append(message.data)
        return message

    monkeypatch.setattr(aiohttp.ClientWebSocketResponse, "receive", keeping)
    return seen


async def _alive(client: EventClient, instructions: str) -> dict:
    """The session still answers: a ``session.update`` of ``instructions`` gets its ``session.updated``."""
    mark = len(client.events)
    await client.send("session.update", session={"instructions": instructions})
    return await client.wait_for("session.updated", timeout=10, after=mark)


NOT_FINITE = [
    ('{"type": "response.create", "event_id": "e1", "response": {"temperature": NaN}}', "response.temperature"),
    ('{"type": "response.create", "event_id": "e2", "response": {"temperature": 1e999}}', "response.temperature"),
    (
        '{"type": "response.create", "event_id": "e3", "response": {"max_output_tokens": Infinity}}',
        "response.max_output_tokens",
    ),
    (
        '{"type": "response.create", "event_id": "e4", "response": {"max_response_output_tokens": -Infinity}}',
        "response.max_response_output_tokens",
    ),
    (
        '{"type": "response.create", "event_id": "e5", "response": {"max_output_tokens": -1e400}}',
        "response.max_output_tokens",
    ),
    (
        '{"type": "response.create", "event_id": "e6", "response": '
        '{"audio": {"output": {"format": {"type": "audio/pcm", "rate": NaN}}}}}',
        "response.audio.output.format.rate",
    ),
    (
        '{"type": "response.create", "event_id": "e7", "response": {"tools": [{"type": "function", "name": "f", '
        '"parameters": {"type": "object", "properties": {"n": {"type": "number", "maximum": Infinity}}}}]}}',
        "response.tools[0].parameters.properties.n.maximum",
    ),
    ('{"type": "session.update", "event_id": "e8", "session": {"temperature": NaN}}', "session.temperature"),
]


async def test_numbers_that_are_not_finite_are_refused_naming_them(models, gateway_config, frames):
    """Failed before: a ``response.create`` with ``"temperature": NaN`` (Python's json reads the
    literal; ``1e999`` is infinity) started a response, and a NaN in its tools' schema would have
    been echoed as ``NaN``, which no JSON parser of a browser reads. Now each gets the error the
    session config gives (``invalid_request_error``, ``invalid_value``, "Input should be a finite
    number", ``param`` the field's path, the ``event_id`` echoed), nothing starts, and the
    session goes on."""
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            for index, (raw, param) in enumerate(NOT_FINITE, start=1):
                mark = len(client.events)
                await client.send_raw(raw)
                error = (await client.wait_for("error", timeout=10, after=mark))["error"]
                expected = {
                    "type": "invalid_request_error",
                    "code": "invalid_value",
                    "param": param,
                    "message": f"Invalid value for '{param}': Input should be a finite number",
                    "event_id": f"e{index}",
                }
                assert {key: error.get(key) for key in expected} == expected, raw
            mark = len(client.events)
            await client.send("response.create", event_id="e9", response={"temperature": "hot"})
            error = (await client.wait_for("error", timeout=10, after=mark))["error"]
            assert (error["code"], error["param"], error["event_id"]) == (
                "invalid_value",
                "response.temperature",
                "e9",
            )
            assert "valid number" in error["message"], error
            await _alive(client, "Be brief.")
            assert not client.of_type("response.created")
        assert await wait_until(lambda: app_idle(app), 10)
    assert not [frame for frame in frames if "NaN" in frame or "Infinity" in frame]


async def test_non_ascii_goes_out_as_utf8_not_escaped(models, gateway_config, frames):
    """Failed before: every non-ASCII character went out as a ``\\uXXXX`` escape (an emoji as 12
    bytes, ``"\\ud83d\\ude00"``). Now the instructions and the item's text come back as they
    were sent, raw UTF-8 in the frame."""
    async with serve(gateway_config(), models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            updated = await _alive(client, WORDS)
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": WORDS}]}
            mark = len(client.events)
            await client.send("conversation.item.create", item=item)
            created = await client.wait_for("conversation.item.added", timeout=10, after=mark)
        assert await wait_until(lambda: app_idle(app), 10)
    assert updated["session"]["instructions"] == WORDS
    assert created["item"]["content"][0]["text"] == WORDS
    for kind in ("session.updated", "conversation.item.added"):
        (frame,) = [f for f in frames if json.loads(f)["type"] == kind]
        assert WORDS in frame and "\\u" not in frame, frame[:300]


async def test_a_lone_surrogate_does_not_break_the_session(models, gateway_config, caplog):
    """A lone surrogate cannot be UTF-8 encoded: sent raw, aiohttp's encoder would raise in the
    socket's writer, and every later event of the session would be lost. One in a client event is
    repaired at the door (U+FFFD); failed before: one in a session config sent over HTTP (a
    client_secrets request) was kept, the LLM's read-ahead of the instructions failed (an ERROR),
    and ``session.created`` echoed it. Now the HTTP edge repairs it too, and the serializer writes
    any that gets past both as U+FFFD (tests/realtime/test_wire.py). The session goes on."""
    async with serve(gateway_config(), models) as (url, app):
        async with aiohttp.ClientSession() as http:
            session = {"type": "realtime", "instructions": "before \ud800 after 😀"}
            async with http.post(f"{url}/v1/realtime/client_secrets", json={"session": session}) as minted:
                assert minted.status == 200, await minted.text()
                key = (await minted.json())["value"]
        async with EventClient(url, headers={"Authorization": f"Bearer {key}"}) as client:
            created = await client.wait_for("session.created", timeout=10)
            assert created["session"]["instructions"] == "before \ufffd after 😀"
            mark = len(client.events)
            await client.send_raw(
                '{"type": "conversation.item.create", "item": {"type": "message", "role": "user", '
                '"content": [{"type": "input_text", "text": "x \\udc00 y \\ud83d\\ude00"}]}}'
            )
            item = (await client.wait_for("conversation.item.added", timeout=10, after=mark))["item"]
            assert item["content"][0]["text"] == "x \ufffd y 😀"
            assert (await _alive(client, "Still here."))["session"]["instructions"] == "Still here."
            assert not client.of_type("error") and client.read_error is None
        assert await wait_until(lambda: app_idle(app), 10)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
