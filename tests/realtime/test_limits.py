"""What one session may send to the shared model is bounded (``gateway.realtime.limits``).

Each limit refused gives an ``error`` naming it (OpenAI's codes, ``param`` the field), changes
nothing, and the session goes on; what the prompt builder hands the engine stays bounded however
long the conversation gets. On the PipelineControlDouble: no models, no sockets.
"""

from __future__ import annotations

import json

import pytest

from gateway.config import GatewayConfig
from gateway.realtime.conversation import PromptSpec
from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits
from gateway.realtime.session import RealtimeSession
from gateway.realtime.session_config import parse_update
from tests.realtime.harness import LOCAL, Harness, client, user_text
from tests.realtime.test_tools import WEATHER

LIMITS = SessionLimits()


def harness(limits: SessionLimits) -> Harness:
    """A Harness whose session has ``limits``."""
    h = Harness()
    h.sent.clear()
    h.rt = RealtimeSession(
        h.pipeline,
        h.sent.append,
        local_models=LOCAL,
        call_later=h.timers.call_later,
        clock=h.timers.clock,
        limits=limits,
    )
    h.rt.start()
    return h


def assert_refused(events: list[dict], code: str, param: str) -> dict:
    assert [e["type"] for e in events] == ["error"], events
    error = events[0]["error"]
    assert (error["code"], error["param"]) == (code, param), error
    assert error["type"] == "invalid_request_error" and error["message"]
    return error


def alive(h: Harness) -> None:
    assert [e["type"] for e in h.run(client("input_audio_buffer.clear"))] == ["input_audio_buffer.cleared"]


# ---------------------------------------------------------------- instructions
@pytest.mark.parametrize("shape", [{"type": "realtime"}, {"modalities": ["text", "audio"]}], ids=["ga", "beta"])
def test_instructions_over_the_limit_are_refused_in_session_update(shape: dict) -> None:
    h = Harness()
    before = h.pipeline.settings.instructions
    huge = "Be brief. " * 10_000  # 100 kB: under the 128 KiB message limit
    error = assert_refused(
        h.run(client("session.update", "evt_big", session={**shape, "instructions": huge})),
        "string_above_max_length",
        "session.instructions",
    )
    assert str(LIMITS.max_instructions_chars) in error["message"] and error["event_id"] == "evt_big"
    assert h.pipeline.settings.instructions == before, "nothing applied"
    alive(h)
    just_under = "x" * LIMITS.max_instructions_chars
    assert (
        h.run(client("session.update", session={**shape, "instructions": just_under}))[-1]["type"] == "session.updated"
    )
    assert h.pipeline.settings.instructions == just_under


def test_instructions_over_the_limit_are_refused_in_response_create() -> None:
    h = Harness()
    h.run(user_text())
    huge = "y" * (LIMITS.max_instructions_chars + 1)
    assert_refused(
        h.run(client("response.create", response={"instructions": huge})),
        "string_above_max_length",
        "response.instructions",
    )
    assert h.pipeline.requests == [] and h.rt.responses.active() is None
    alive(h)


def test_parse_update_reports_a_limit_with_its_code() -> None:
    """The offer and client_secrets paths validate with parse_update: a limit is a ClientError."""
    with pytest.raises(ClientError) as raised:
        parse_update({"instructions": "z" * 20_000})
    assert (raised.value.code, raised.value.param) == ("string_above_max_length", "session.instructions")
    with pytest.raises(ClientError) as raised:
        parse_update({"type": "realtime", "tools": [{"name": 1}]})
    assert raised.value.param == "session.tools[0].name"


@pytest.mark.parametrize(
    ("session", "param"),
    [
        ({"turn_detection": {"type": "server_vad", "threshold": float("nan")}}, "session.turn_detection.threshold"),
        ({"type": "realtime", "audio": {"output": {"speed": float("inf")}}}, "session.audio.output.speed"),
        ({"temperature": float("nan")}, "session.temperature"),  # was accepted: a NaN temperature for the LLM
    ],
)
def test_a_number_that_is_not_finite_is_told_so(session: dict, param: str) -> None:
    """NaN was answered "should be less than or equal to 1" (a NaN fails every bound), and a NaN
    temperature passed; now each is "a finite number"."""
    with pytest.raises(ClientError) as raised:
        parse_update(session)
    assert raised.value.param == param and "finite number" in str(raised.value), str(raised.value)


# ---------------------------------------------------------------- tools
def test_too_many_tools_are_refused() -> None:
    h = harness(SessionLimits(max_tools=3))
    tools = [{**WEATHER, "name": f"tool_{i}"} for i in range(4)]
    error = assert_refused(
        h.run(client("session.update", session={"type": "realtime", "tools": tools})),
        "array_above_max_length",
        "session.tools",
    )
    assert "maximum length 3" in error["message"]
    assert (
        h.run(client("session.update", session={"type": "realtime", "tools": tools[:3]}))[-1]["type"]
        == "session.updated"
    )
    h.run(user_text())
    assert_refused(
        h.run(client("response.create", response={"tools": tools})), "array_above_max_length", "response.tools"
    )


def test_a_tool_definition_over_the_size_limit_is_refused() -> None:
    h = Harness()
    big = {**WEATHER, "description": "d" * LIMITS.max_tool_bytes}
    error = assert_refused(
        h.run(client("session.update", session={"type": "realtime", "tools": [WEATHER, big]})),
        "limit_exceeded",
        "session.tools[1]",
    )
    assert "max_tool_bytes" in error["message"]
    assert h.rt.settings.call.tools == ()
    alive(h)


def test_tools_over_the_limit_together_are_refused_though_each_fits() -> None:
    """Each tool under ``max_tool_bytes``, all of them over ``max_tools_bytes``: before the total
    limit, 128 tools of 32 KB (4 MB) were taken, listed in every decision prompt and echoed in every
    ``session.updated`` (docs/BENCHMARKS.md, hostile input)."""
    h = Harness()
    tools = [{**WEATHER, "name": f"tool_{n}", "description": "d" * 30_000} for n in range(3)]
    assert all(len(json.dumps(tool)) < LIMITS.max_tool_bytes for tool in tools)
    error = assert_refused(
        h.run(client("session.update", session={"type": "realtime", "tools": tools})),
        "limit_exceeded",
        "session.tools",
    )
    assert "max_tools_bytes" in error["message"]
    assert h.rt.settings.call.tools == ()
    assert h.run(client("session.update", session={"type": "realtime", "tools": tools[:2]}))[-1]["type"] == (
        "session.updated"
    )
    h.run(user_text())
    assert_refused(h.run(client("response.create", response={"tools": tools})), "limit_exceeded", "response.tools")
    small = harness(SessionLimits(max_tools_bytes=300))  # WEATHER is 183 bytes of compact JSON
    assert_refused(
        small.run(client("session.update", session={"type": "realtime", "tools": [WEATHER, WEATHER | {"name": "w2"}]})),
        "limit_exceeded",
        "session.tools",
    )
    alive(h)
    alive(small)


# ---------------------------------------------------------------- items and the conversation
def test_item_text_over_the_limit_is_refused() -> None:
    h = harness(SessionLimits(max_item_chars=100))
    assert_refused(h.run(user_text("w" * 101)), "string_above_max_length", "item.content")
    long_output = {"type": "function_call_output", "call_id": "c1", "output": "o" * 101}
    assert_refused(
        h.run(client("conversation.item.create", item=long_output)), "string_above_max_length", "item.output"
    )
    long_args = {"type": "function_call", "name": "f", "arguments": '{"a": "' + "a" * 100 + '"}'}
    assert_refused(
        h.run(client("conversation.item.create", item=long_args)), "string_above_max_length", "item.arguments"
    )
    inline = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "i" * 101}]}
    assert_refused(
        h.run(client("response.create", response={"input": [inline]})),
        "string_above_max_length",
        "response.input[0].content",
    )
    assert h.rt.items == [] and h.pipeline.requests == []
    assert [e["type"] for e in h.run(user_text("w" * 100))] == ["conversation.item.added", "conversation.item.done"]


def test_a_full_conversation_refuses_client_items_and_drops_the_oldest_server_items() -> None:
    h = harness(SessionLimits(max_conversation_items=4))
    for n in range(4):
        h.run(user_text(f"turn {n}"))
    error = assert_refused(h.run(user_text("one more")), "limit_exceeded", "item")
    assert "max_conversation_items" in error["message"] and len(h.rt.items) == 4
    oldest = h.rt.items[0]["id"]
    events = h.run(client("response.create"))  # the server adds the reply's item: the oldest goes
    assert {"type": "conversation.item.deleted", "item_id": oldest} in [
        {"type": e["type"], "item_id": e.get("item_id")} for e in events
    ]
    assert len(h.rt.items) == 4 and h.rt.items[-1]["role"] == "assistant"


def test_the_prompt_stays_within_max_prompt_chars_and_keeps_the_question() -> None:
    h = harness(SessionLimits(max_prompt_chars=5_000, max_item_chars=3_000))
    for n in range(6):
        h.run(user_text(f"old turn {n} " + "blah " * 500))
    h.run(user_text("What is two plus two?"))
    h.run(client("response.create"))
    messages = h.pipeline.requests[-1][0]
    assert sum(len(m.content) for m in messages) <= 5_000
    assert messages[0].role == "system" and messages[-1].content == "What is two plus two?"
    assert len(messages) < 8, "the oldest turns were dropped"


def test_a_long_conversation_hands_the_engine_a_bounded_prompt() -> None:
    """Many turns of long text: the prompt is bounded by history_turns and max_prompt_chars."""
    h = Harness()
    h.run(client("session.update", session={"type": "realtime", "instructions": "i" * LIMITS.max_instructions_chars}))
    for n in range(40):
        h.run(user_text(f"{n} " + "long words " * 2_900))
    prompt = h.rt.conversation.prompt(PromptSpec(), h.rt.settings.call.instructions)
    assert sum(len(m.content) for m in prompt) <= LIMITS.max_prompt_chars
    assert prompt[-1].content.startswith("39 ")


# ---------------------------------------------------------------- configuration
def test_limits_come_from_the_gateway_config() -> None:
    config = GatewayConfig(max_instructions_chars=10, max_tools=2, max_prompt_chars=99)
    limits = SessionLimits.from_config(config)
    assert (limits.max_instructions_chars, limits.max_tools, limits.max_prompt_chars) == (10, 2, 99)
    assert SessionLimits.from_config(GatewayConfig()) == SessionLimits(), "config defaults are the documented ones"
    h = harness(limits)
    assert_refused(
        h.run(client("session.update", session={"instructions": "x" * 11})),
        "string_above_max_length",
        "session.instructions",
    )
