"""The OpenAI-compatible HTTP engine never hangs: silent or absent servers end the turn with an error.

(Streaming from a real server is tested in tests/e2e/test_llm_http_server.py.)
"""

from __future__ import annotations

import socket
import time
from typing import Optional

import pytest

from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions, LanguageModelError, ToolCall
from gateway.models.openai_http.llm import OpenAIHttpLanguageModel, chat_message
from tests.doubles import ChatStreamServerDouble

QUESTION = [ChatMessage("user", "hello")]


def test_a_silent_server_gives_an_error_within_the_read_timeout(silent_server: str) -> None:
    llm = OpenAIHttpLanguageModel("any", silent_server, read_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(LanguageModelError, match="did not answer in time"):
        llm.generate(QUESTION, 16, lambda: False, lambda piece: None)
    assert time.monotonic() - started < 10 * 1.0  # the read timeout, not a hang (bound 10x loose)
    llm.close()


def test_a_cancel_while_the_server_is_silent_returns_at_once(silent_server: str) -> None:
    llm = OpenAIHttpLanguageModel("any", silent_server, read_timeout_s=600.0)
    asked = time.monotonic()
    result = llm.generate(QUESTION, 16, lambda: time.monotonic() - asked > 0.3, lambda piece: None)
    # Returned on the cancel, long before the read timeout (bound 10x the ~1 s it may take).
    assert result.finish_reason == "cancelled" and time.monotonic() - asked < 10.0
    llm.close()


def test_no_server_gives_an_error_at_once() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once closed
    llm = OpenAIHttpLanguageModel("any", f"http://127.0.0.1:{port}/v1", connect_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(LanguageModelError, match="cannot be reached"):
        llm.generate(QUESTION, 16, lambda: False, lambda piece: None)
    assert time.monotonic() - started < 10 * 1.0  # the connect timeout at most (bound 10x loose)
    llm.close()


def test_request_shape_carries_tools_and_calls() -> None:
    llm = OpenAIHttpLanguageModel("served-model", "http://127.0.0.1:1/v1", temperature=0.3)
    tool = FunctionTool("get_time", "Current time", {"type": "object", "properties": {}})
    body = llm.request_body(QUESTION, 32, GenerationOptions(tools=[tool], tool_choice="get_time", seed=3))
    assert body["model"] == "served-model" and body["stream"] is True and body["max_tokens"] == 32
    assert body["temperature"] == 0.3 and body["seed"] == 3
    assert body["tools"][0]["function"]["name"] == "get_time"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_time"}}
    assert "tools" not in llm.request_body(QUESTION, 32, GenerationOptions(tools=[tool], tool_choice="none"))
    assert "extra_body" not in body, "no field outside OpenAI's unless asked for"
    retry = llm.request_body(QUESTION, 32, GenerationOptions(min_tokens=4))
    assert retry["extra_body"] == {"min_tokens": 4}, "a retried reply's barred end: vLLM, SGLang, llama_cpp.server"
    call = ChatMessage("assistant", "", tool_calls=[ToolCall("call_1", "get_time", "{}")])
    assert chat_message(call)["tool_calls"][0]["function"] == {"name": "get_time", "arguments": "{}"}
    output = chat_message(ChatMessage("tool", "12:00", tool_call_id="call_1"))
    assert output == {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}
    llm.close()


def test_streamed_tool_call_deltas_are_joined_by_index() -> None:
    import queue as queues

    from gateway.models.openai_http.llm import _merge_call_delta, _put_chunk

    events: queues.Queue[object] = queues.Queue()
    chunks = [
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_9",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": ""},
                            }
                        ]
                    }
                }
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    for chunk in chunks:
        _put_chunk(chunk, events)
    calls: dict[int, dict[str, str]] = {}
    kinds = []
    while not events.empty():
        kind, value = events.get()
        kinds.append(kind)
        if kind == "tool":
            _merge_call_delta(calls, value)
    assert kinds == ["tool", "tool", "tool", "finish"]
    assert calls == {0: {"id": "call_9", "name": "get_weather", "arguments": '{"city": "Paris"}'}}


def _call_delta(arguments: str, first: bool = False) -> dict:
    function = {"name": "add_to_shopping_list", "arguments": arguments} if first else {"arguments": arguments}
    call = {"index": 0, "type": "function", "function": function, **({"id": "call_srv1"} if first else {})}
    return {"delta": {"tool_calls": [call]}}


SHOPPING = FunctionTool(
    "add_to_shopping_list", "Add an item to the shopping list.", {"type": "object", "properties": {"item": {}}}
)


@pytest.mark.parametrize(
    ("ending", "finish"),
    [
        ({"delta": {}, "finish_reason": "length"}, "length"),  # the server's max_tokens cut the call
        (None, "budget"),  # the stream stalls past the budget
    ],
)
def test_a_call_cut_short_is_no_call(ending: Optional[dict], finish: str) -> None:
    """Failed before: the pieces of a call cut after ``{"item": "milk`` were handed on as a call
    (finish "tool_calls", broken JSON arguments for the client). Now the response is incomplete."""
    deltas = [_call_delta("", first=True), _call_delta('{"item": "milk')]
    server = ChatStreamServerDouble([*deltas, ending] if ending else deltas, hold_s=0.0 if ending else 3.0)
    llm = OpenAIHttpLanguageModel("any", server.base_url)
    try:
        options = GenerationOptions(tools=[SHOPPING], tool_choice="auto", budget_s=1.0)
        result = llm.generate(QUESTION, 16, lambda: False, lambda piece: None, options)
    finally:
        llm.close()
        server.close()
    assert result.tool_calls == [] and result.finish_reason == finish and result.status == "incomplete", result


def test_a_whole_call_is_handed_on_and_broken_arguments_are_an_error() -> None:
    whole = ChatStreamServerDouble(
        [_call_delta("", first=True), _call_delta('{"item": "milk"}'), {"delta": {}, "finish_reason": "tool_calls"}]
    )
    broken = ChatStreamServerDouble(
        [_call_delta("", first=True), _call_delta('{"item": "milk'), {"delta": {}, "finish_reason": "tool_calls"}]
    )
    options = GenerationOptions(tools=[SHOPPING], tool_choice="auto")
    try:
        llm = OpenAIHttpLanguageModel("any", whole.base_url)
        result = llm.generate(QUESTION, 16, lambda: False, lambda piece: None, options)
        llm.close()
        assert result.finish_reason == "tool_calls" and result.tool_calls[0].arguments == '{"item": "milk"}', result
        llm = OpenAIHttpLanguageModel("any", broken.base_url)
        with pytest.raises(LanguageModelError, match="no valid tool call"):
            llm.generate(QUESTION, 16, lambda: False, lambda piece: None, options)
        llm.close()
    finally:
        whole.close()
        broken.close()
