"""Function calling in the Realtime protocol, on the PipelineControlDouble (no models).

``session.tools`` / ``tool_choice`` (GA and beta shapes, and per ``response.create``) are checked,
shown in the session views and handed to the pipeline; a call the model makes becomes a
``function_call`` output item with the event order of the OpenAI Realtime API; a
``function_call_output`` item reaches the next prompt as a tool message; a cancelled response
never reports its call, and no call id is reported twice.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest

from gateway.models.base import ChatMessage, FunctionTool, ToolCall
from gateway.pipeline import events as pe
from gateway.realtime.conversation import PromptSpec
from tests.realtime.harness import (
    ID_SHAPE,
    RESPONSE_START,
    SID,
    Harness,
    Step,
    barge_in,
    client,
    playback_started,
    said,
    speech_started,
    user_text,
    wrote,
)

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TIME = {
    "type": "function",
    "name": "get_time",
    "description": "The time now in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
CALL_EVENTS = [
    "response.output_item.added",
    "conversation.item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "conversation.item.done",
]
RESPONSE_END = ["response.done", "rate_limits.updated"]


def with_tools(h: Harness, *tools: dict, choice: Any = None, beta: bool = False) -> dict:
    session: dict[str, Any] = {"tools": list(tools)}
    if choice is not None:
        session["tool_choice"] = choice
    session |= {"modalities": ["text", "audio"]} if beta else {"type": "realtime"}
    return h.run(client("session.update", session=session))[-1]


def called(
    name: str = "get_weather",
    arguments: str = '{"city": "Paris"}',
    call_id: str = "call_abc123",
    text: str = "",
    audio: bool = True,
    status: str = "completed",
) -> Step:
    """The pipeline finished the current response with one function call."""

    def step(h: Harness) -> Any:
        h.pipeline.live = False
        return pe.ResponseFinished(
            SID,
            generation=h.pipeline.generation,
            text=text,
            status=status,
            audio=audio,
            output_tokens=12,
            tool_calls=[ToolCall(call_id, name, arguments)],
        )

    return step


def ask_weather(h: Harness) -> None:
    with_tools(h, WEATHER)
    h.run(user_text("What's the weather in Paris?"))
    h.run(client("response.create"))


# ---------------------------------------------------------------- tools in the session
def test_session_tools_are_shown_and_reach_the_pipeline() -> None:
    h = Harness()
    assert h.sent[0]["session"]["tools"] == [] and h.sent[0]["session"]["tool_choice"] == "auto"
    session = with_tools(h, WEATHER, TIME, choice="required")["session"]
    assert session["tools"] == [WEATHER, TIME] and session["tool_choice"] == "required"
    h.run(user_text())
    h.run(client("response.create"))
    tools, choice = h.pipeline.tool_requests[-1]
    assert tools == [
        FunctionTool("get_weather", WEATHER["description"], WEATHER["parameters"]),
        FunctionTool("get_time", TIME["description"], TIME["parameters"]),
    ]
    assert choice == "required"


def test_official_example_tools_round_trip_in_both_shapes() -> None:
    """The session.update examples of OpenAI's spec (GA and beta) give the tools back as sent."""
    palette = {
        "type": "function",
        "name": "display_color_palette",
        "description": "Call this function when a user asks for a color palette.",
        "parameters": {
            "type": "object",
            "strict": True,
            "properties": {
                "theme": {"type": "string", "description": "Description of the theme for the color scheme."},
                "colors": {
                    "type": "array",
                    "description": "Array of five hex color codes based on the theme.",
                    "items": {"type": "string", "description": "Hex color code"},
                },
            },
            "required": ["theme", "colors"],
        },
    }
    ga = Harness()
    shown = ga.run(client("session.update", session={"type": "realtime", "tools": [palette], "tool_choice": "auto"}))
    assert shown[-1]["session"]["tools"] == [palette] and shown[-1]["session"]["tool_choice"] == "auto"
    beta = Harness()
    shown = beta.run(
        client(
            "session.update",
            session={
                "modalities": ["text"],
                "tools": [palette],
                "tool_choice": {"type": "function", "name": palette["name"]},
            },
        )
    )
    view = shown[-1]["session"]
    assert "modalities" in view and view["tools"] == [palette]
    assert view["tool_choice"] == {"type": "function", "name": "display_color_palette"}


def test_tool_choice_shapes_map_to_the_engine() -> None:
    h = Harness()
    with_tools(h, WEATHER, TIME, choice={"type": "function", "name": "get_time"})
    h.run(user_text())
    for response, expected in [
        ({}, "get_time"),
        ({"tool_choice": "none"}, "none"),
        ({"tool_choice": "auto"}, "auto"),
        ({"tools": [], "tool_choice": "auto"}, "none"),
    ]:
        h.run(client("response.create", response=response))
        tools, choice = h.pipeline.tool_requests[-1]
        assert choice == expected, response
        assert tools == ([] if response.get("tools") == [] else tools)
        h.run(client("response.cancel"))
    # response.tools replaces the session's for that response only
    h.run(
        client(
            "response.create", response={"tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_weather"}}
        )
    )
    assert [t.name for t in h.pipeline.tool_requests[-1][0]] == ["get_weather"]
    assert h.pipeline.tool_requests[-1][1] == "get_weather"
    assert [t["name"] for t in h.rt.describe()["tools"]] == ["get_weather", "get_time"]


BAD_TOOLS = [
    ({"tools": "get_weather"}, "session.tools", "invalid_type"),
    ({"tools": [42]}, "session.tools[0]", "invalid_type"),
    ({"tools": [{"type": "mcp", "server_label": "x"}]}, "session.tools[0].type", "invalid_value"),
    ({"tools": [{"type": "function"}]}, "session.tools[0].name", "missing_required_parameter"),
    (
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        "session.tools[0].name",
        "missing_required_parameter",
    ),
    ({"tools": [{"type": "function", "name": "get weather!"}]}, "session.tools[0].name", "invalid_value"),
    ({"tools": [WEATHER, WEATHER]}, "session.tools[1].name", "invalid_value"),
    ({"tools": [{**WEATHER, "description": 7}]}, "session.tools[0].description", "invalid_type"),
    ({"tools": [{**WEATHER, "parameters": "city"}]}, "session.tools[0].parameters", "invalid_type"),
    ({"tools": [{**WEATHER, "parameters": {"type": "string"}}]}, "session.tools[0].parameters.type", "invalid_value"),
    (
        {"tools": [{**WEATHER, "parameters": {"type": "object", "properties": []}}]},
        "session.tools[0].parameters.properties",
        "invalid_type",
    ),
    (
        {"tools": [{**WEATHER, "parameters": {"type": "object", "properties": {"city": {"type": "text"}}}}]},
        "session.tools[0].parameters.properties.city.type",
        "invalid_value",
    ),
    (
        {"tools": [{**WEATHER, "parameters": {"type": "object", "required": "city"}}]},
        "session.tools[0].parameters.required",
        "invalid_type",
    ),
    ({"tool_choice": "sometimes"}, "session.tool_choice", "invalid_value"),
    ({"tool_choice": {"type": "function"}}, "session.tool_choice.name", "invalid_value"),
    ({"tool_choice": {"type": "function", "name": "get_time"}}, "session.tool_choice", "invalid_value"),
    (
        {"tools": [TIME], "tool_choice": {"type": "function", "name": "get_weather"}},
        "session.tool_choice",
        "invalid_value",
    ),
]


@pytest.mark.parametrize(("session", "param", "code"), BAD_TOOLS, ids=[row[1] + ":" + row[2] for row in BAD_TOOLS])
@pytest.mark.parametrize("shape", ["ga", "beta"])
def test_malformed_tools_get_an_error_naming_the_field(session: dict, param: str, code: str, shape: str) -> None:
    h = Harness()
    with_tools(h, WEATHER, beta=shape == "beta")
    before = h.rt.describe()
    dialect = {"type": "realtime"} if shape == "ga" else {"modalities": ["text", "audio"]}
    error = h.run(client("session.update", "evt_tools", session={**dialect, **session}))
    assert [e["type"] for e in error] == ["error"]
    assert (error[0]["error"]["param"], error[0]["error"]["code"]) == (param, code), error[0]
    assert error[0]["error"]["event_id"] == "evt_tools" and param in error[0]["error"]["message"]
    assert h.rt.describe() == before, "a rejected update changes nothing"
    assert [e["type"] for e in h.run(client("input_audio_buffer.clear"))] == ["input_audio_buffer.cleared"]


@pytest.mark.parametrize(
    ("response", "param"),
    [
        ({"tools": [{"type": "function", "name": 5}]}, "response.tools[0].name"),
        ({"tool_choice": "always"}, "response.tool_choice"),
        ({"tools": [TIME], "tool_choice": {"type": "function", "name": "get_weather"}}, "response.tool_choice"),
    ],
)
def test_malformed_response_tools_get_an_error_and_no_response(response: dict, param: str) -> None:
    h = Harness()
    with_tools(h, WEATHER)
    h.run(user_text())
    error = h.run(client("response.create", "evt_r", response=response))
    assert [e["type"] for e in error] == ["error"] and error[0]["error"]["param"] == param
    assert h.pipeline.requests == [] and h.rt.responses.active() is None


# ---------------------------------------------------------------- a call's events
def test_a_function_call_gives_the_realtime_event_sequence() -> None:
    h = Harness()
    ask_weather(h)
    assert [e["type"] for e in h.sent[-1:]] == ["response.created"], "no message item before the model decides"
    user_item = h.rt.items[-1]["id"]
    events = h.run(called())
    assert [e["type"] for e in events] == [*CALL_EVENTS, *RESPONSE_END]
    added, conv_added, delta, args_done, item_done, conv_done, done = events[:7]
    response_id = h.last("response.created")["response"]["id"]
    item = added["item"]
    assert item == {
        "id": item["id"],
        "object": "realtime.item",
        "type": "function_call",
        "status": "in_progress",
        "call_id": "call_abc123",
        "name": "get_weather",
        "arguments": "",
    }
    assert ID_SHAPE.match(item["id"]) and added["response_id"] == response_id and added["output_index"] == 0
    assert conv_added["previous_item_id"] == user_item and conv_added["item"] == item
    ids = {"response_id": response_id, "item_id": item["id"], "output_index": 0, "call_id": "call_abc123"}
    assert {k: delta[k] for k in ids} == ids and delta["delta"] == '{"city": "Paris"}'
    assert {k: args_done[k] for k in ids} == ids
    assert args_done["name"] == "get_weather" and json.loads(args_done["arguments"]) == {"city": "Paris"}
    final = {**item, "status": "completed", "arguments": '{"city": "Paris"}'}
    assert item_done["item"] == final and item_done["output_index"] == 0 and conv_done["item"] == final
    body = done["response"]
    assert body["status"] == "completed" and body["output"] == [final] and body["usage"]["output_tokens"] == 12
    assert h.rt.items[-1] == final, "the call is in the conversation"
    assert "content" not in h.run(client("conversation.item.retrieve", item_id=item["id"]))[-1]["item"]


def test_beta_session_gets_the_beta_names_for_a_call() -> None:
    h = Harness()
    with_tools(h, WEATHER, beta=True)
    h.run(user_text("Weather in Paris?"))
    h.run(client("response.create"))
    types = [e["type"] for e in h.run(called())]
    assert types == [
        "response.output_item.added",
        "conversation.item.created",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        *RESPONSE_END,
    ]


def test_words_then_a_call_are_two_output_items_in_order() -> None:
    h = Harness()
    ask_weather(h)
    opened = h.run(said("Let me check."))
    assert [e["type"] for e in opened] == [*RESPONSE_START[1:], "response.output_audio_transcript.delta"]
    h.run(playback_started(400, "Let me check."))
    events = h.run(called(text="Let me check."))
    assert [e["type"] for e in events] == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        *CALL_EVENTS,
        *RESPONSE_END,
    ]
    assert events[3]["output_index"] == 0 and events[5]["output_index"] == 1 and events[7]["output_index"] == 1
    output = h.last("response.done")["response"]["output"]
    assert [o["type"] for o in output] == ["message", "function_call"]
    assert output[0]["content"][0]["transcript"] == "Let me check."


def test_a_text_answer_with_tools_opens_its_message_when_words_come() -> None:
    h = Harness()
    with_tools(h, WEATHER)
    h.run(user_text("Hello!"))
    h.run(client("response.create", response={"output_modalities": ["text"]}))
    events = h.run(wrote("Hi there."))
    assert [e["type"] for e in events] == [*RESPONSE_START[1:], "response.output_text.delta"]
    h.pipeline.live = False
    done = h.run(lambda h: pe.ResponseFinished(SID, generation=h.pipeline.generation, text="Hi there.", audio=False))
    assert "response.function_call_arguments.done" not in [e["type"] for e in done]
    assert h.last("response.done")["response"]["output"][0]["content"] == [{"type": "output_text", "text": "Hi there."}]


def test_calls_are_ignored_when_the_response_may_not_call() -> None:
    h = Harness()
    with_tools(h, WEATHER, choice="none")
    h.run(user_text())
    h.run(client("response.create"))
    assert h.pipeline.tool_requests[-1][1] == "none"
    events = h.run(called())
    assert "response.function_call_arguments.done" not in [e["type"] for e in events]


# ---------------------------------------------------------------- the output goes back to the model
def test_function_call_output_continues_the_conversation() -> None:
    h = Harness()
    ask_weather(h)
    h.run(called())
    output = {"type": "function_call_output", "call_id": "call_abc123", "output": '{"temperature_c": 18}'}
    created = h.run(client("conversation.item.create", item=output))
    assert [e["type"] for e in created] == ["conversation.item.added", "conversation.item.done"]
    assert created[0]["item"] == {
        "id": created[0]["item"]["id"],
        "type": "function_call_output",
        "call_id": "call_abc123",
        "output": '{"temperature_c": 18}',
        "object": "realtime.item",
        "status": "completed",
    }
    h.run(client("response.create"))
    messages = h.pipeline.requests[-1][0]
    assert messages[1:] == [
        ChatMessage("user", "What's the weather in Paris?"),
        ChatMessage("assistant", "", tool_calls=[ToolCall("call_abc123", "get_weather", '{"city": "Paris"}')]),
        ChatMessage("tool", '{"temperature_c": 18}', tool_call_id="call_abc123"),
    ]
    h.run(said("It is 18 degrees in Paris."))
    h.pipeline.live = False
    h.run(lambda h: pe.ResponseFinished(SID, generation=h.pipeline.generation, text="It is 18 degrees in Paris."))
    assert h.last("response.done")["response"]["output"][0]["type"] == "message"


def test_client_made_function_items_are_checked() -> None:
    h = Harness()
    for item, param, code in [
        ({"type": "function_call_output", "output": "18"}, "item.call_id", "missing_required_parameter"),
        ({"type": "function_call_output", "call_id": "c1", "output": {"t": 18}}, "item.output", "invalid_type"),
        ({"type": "function_call", "arguments": "{}"}, "item.name", "missing_required_parameter"),
        ({"type": "function_call", "name": "f", "arguments": {}}, "item.arguments", "invalid_type"),
    ]:
        error = h.run(client("conversation.item.create", item=item))[-1]["error"]
        assert (error["param"], error["code"]) == (param, code)
    made = h.run(
        client("conversation.item.create", item={"type": "function_call", "name": "get_time", "arguments": "{}"})
    )[0]["item"]
    assert made["call_id"].startswith("call_") and "content" not in made


def test_an_old_tool_output_keeps_its_call_in_the_prompt() -> None:
    h = Harness()
    h.rt.conversation._history_turns = 1  # the last two messages, here two tool outputs
    for item in [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Oslo and Rome?"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "cold"},
        {"type": "function_call_output", "call_id": "c2", "output": "warm"},
    ]:
        h.run(client("conversation.item.create", item=item))
    messages = h.rt.conversation.prompt(PromptSpec(), "sys")
    assert [m.role for m in messages] == ["system", "assistant", "tool", "tool"], "a tool output keeps its call"
    assert [c.call_id for c in messages[1].tool_calls] == ["c1", "c2"], "calls in a row are one assistant turn"


# ---------------------------------------------------------------- barge-in and cancel
@pytest.mark.parametrize("cancel", ["barge-in", "response.cancel"])
def test_a_cancelled_response_never_reports_its_call(cancel: str) -> None:
    h = Harness()
    ask_weather(h)
    generation = h.pipeline.generation
    if cancel == "barge-in":
        h.run(speech_started())
        events = h.run(barge_in())
    else:
        events = h.run(client("response.cancel"))
    assert [e["type"] for e in events] == RESPONSE_END
    assert h.last("response.done")["response"]["status"] == "cancelled"
    assert h.last("response.done")["response"]["output"] == []
    late = h.run(
        lambda h: pe.ResponseFinished(
            SID, generation=generation, tool_calls=[ToolCall("c9", "get_weather", '{"city": "Paris"}')]
        )
    )
    assert late == [], "the cancelled generation's call is dropped"
    assert not [e for e in h.sent if e["type"].startswith("response.function_call_arguments")]
    assert all(item["type"] != "function_call" for item in h.rt.items)


def test_a_call_id_is_reported_once() -> None:
    h = Harness()
    ask_weather(h)
    h.run(called(call_id="call_same"))
    h.run(client("response.create"))
    again = h.run(called(call_id="call_same"))
    assert [e["type"] for e in again] == RESPONSE_END
    done = [e for e in h.sent if e["type"] == "response.function_call_arguments.done"]
    assert [e["call_id"] for e in done] == ["call_same"]


def test_an_incomplete_response_reports_no_call() -> None:
    h = Harness()
    ask_weather(h)
    events = h.run(called(status="incomplete"))
    assert [e["type"] for e in events] == RESPONSE_END
    assert h.last("response.done")["response"]["status"] == "incomplete"


def test_the_session_view_lists_no_tools_by_default_in_beta() -> None:
    h = Harness()
    view: Optional[dict] = h.run(client("session.update", session={"modalities": ["text"]}))[-1]["session"]
    assert view is not None and view["tools"] == [] and view["tool_choice"] == "auto"


def test_instructions_and_tools_are_handed_to_the_engine_when_set_not_at_the_first_question() -> None:
    """At call start and at each ``session.update`` the pipeline may read the prompt's head ahead
    of the first turn (so a session with tools answers its first question as fast as a plain one)."""
    h = Harness()
    assert [p[1] for p in h.pipeline.prepared] == [[]], "the call's default instructions, at start"
    h.run(client("session.update", session={"type": "realtime", "instructions": "Be a weather line."}))
    with_tools(h, WEATHER)
    instructions, tools, choice = h.pipeline.prepared[-1]
    assert instructions == "Be a weather line." and [t.name for t in tools] == ["get_weather"] and choice == "auto"
