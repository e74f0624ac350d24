"""Fitting a prompt into the context: oldest turns go first, never the system prompt or the latest turn."""

from __future__ import annotations

from gateway.models.base import ChatMessage, ToolCall
from gateway.models.llama_cpp.prompt_fit import fit_messages


def words(messages: list[ChatMessage]) -> int:
    return sum(len(m.content.split()) + 2 for m in messages)


def conversation(turns: int) -> list[ChatMessage]:
    messages = [ChatMessage("system", "You are brief.")]
    for i in range(turns):
        messages.append(ChatMessage("user", f"question {i} " + "word " * 20))
        messages.append(ChatMessage("assistant", f"answer {i} " + "w " * 20))
    return [*messages, ChatMessage("user", "the latest question")]


def test_short_prompt_is_unchanged() -> None:
    messages = conversation(2)
    assert fit_messages(messages, words, 1000) == messages


def test_oldest_turns_are_dropped_first() -> None:
    messages = conversation(10)
    fitted = fit_messages(messages, words, 120)
    assert words(fitted) <= 120
    assert fitted[0] == messages[0] and fitted[-1] == messages[-1]
    kept = [m.content.split()[1] for m in fitted[1:-1] if m.role == "user"]
    assert kept and kept == sorted(kept, key=int) and kept[-1] == "9", kept  # the newest turns stay
    assert fitted[1].role == "user", "whole turns are dropped, never half of one"


def test_a_tool_output_keeps_its_call() -> None:
    call = ToolCall("call_1", "get_time", "{}")
    messages = [
        ChatMessage("system", "sys"),
        ChatMessage("user", "old " * 50),
        ChatMessage("assistant", "old answer " * 20),
        ChatMessage("user", "what time is it"),
        ChatMessage("assistant", "", tool_calls=[call]),
        ChatMessage("tool", "12:00", tool_call_id="call_1"),
    ]
    fitted = fit_messages(messages, words, 30)
    assert [m.role for m in fitted] == ["system", "user", "assistant", "tool"]


def test_an_oversized_system_prompt_is_cut_rather_than_refused() -> None:
    messages = [ChatMessage("system", "rule " * 5000), ChatMessage("user", "hello there")]
    fitted = fit_messages(messages, words, 100)
    assert words(fitted) <= 100
    assert fitted[-1].content == "hello there" and fitted[0].content.startswith("rule rule")
