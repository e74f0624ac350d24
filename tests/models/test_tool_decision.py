"""The call decision before a reply (``gateway.models.tool_decision``): words or which tool, by the
real default model's own probabilities, and ``tool_choice`` kept to OpenAI's meaning.

The questions are of the kind an app reported (plain instructions, ``get_weather`` and
``book_table``): the model given both tools in its prompt called ``get_weather`` for every one."""

from __future__ import annotations

import json

import jsonschema
import pytest

from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions, ModelSet
from gateway.models.tool_decision import WORDS, decide, decision_messages, option_names

PLAIN = ChatMessage("system", "You are a helpful assistant.")
WEATHER = FunctionTool(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
BOOK = FunctionTool(
    "book_table",
    "Book a table at a restaurant.",
    {
        "type": "object",
        "properties": {"restaurant": {"type": "string"}, "time": {"type": "string"}, "people": {"type": "integer"}},
        "required": ["restaurant", "time", "people"],
    },
)
TOOLS = [WEATHER, BOOK]
TOOL_TEXT = ("get_weather", "book_table", "<tool", '{"', "parameters", "function")


def test_the_decision_follows_the_options_probabilities() -> None:
    assert option_names(TOOLS, "auto") == [WORDS, "get_weather", "book_table"]
    assert option_names(TOOLS, "required") == ["get_weather", "book_table"]
    words = decide({WORDS: -0.1, "get_weather": -2.5, "book_table": -4.0})
    assert words.tool is None and 0.0 < words.call_probability < 0.5
    call = decide({WORDS: -3.0, "get_weather": -2.0, "book_table": -0.2})
    assert call.tool == "book_table" and call.call_probability > 0.9
    assert decide({WORDS: -0.7, "get_weather": -0.7}, threshold=0.4).tool == "get_weather"
    assert decide({WORDS: -0.7, "get_weather": -0.7}, threshold=0.6).tool is None
    assert decide({"get_weather": -9.0, "book_table": -8.0}).tool == "book_table", "required: no words option"


def test_the_decision_prompt_holds_the_tools_and_the_last_question_only() -> None:
    history = [PLAIN, ChatMessage("user", "Hi!"), ChatMessage("assistant", "Hello."), ChatMessage("user", "Why?")]
    system, user = decision_messages(history, TOOLS)
    assert "- get_weather: Get the current weather for a city." in system.content
    assert "- book_table: Book a table at a restaurant." in system.content
    assert "helpful assistant" not in system.content and "parameters" not in system.content
    assert (user.role, user.content) == ("user", "Why?")


@pytest.mark.parametrize(
    ("question", "tool"),
    [
        ("Book a table for two at Luigi's at 7 pm.", "book_table"),
        ("What's the weather like in Lisbon today?", "get_weather"),
        ("Why is the sky blue?", None),
        ("What is the capital of Canada?", None),
    ],
)
def test_the_model_decides_words_or_which_tool(models: ModelSet, question: str, tool: str) -> None:
    decision = models.llm.decide_tool(  # type: ignore[attr-defined]
        [PLAIN, ChatMessage("user", question)], GenerationOptions(tools=TOOLS, tool_choice="auto")
    )
    assert decision.tool == tool, decision
    assert set(decision.scores) == {WORDS, "get_weather", "book_table"}


@pytest.mark.slow  # a constrained call of ~25 tokens (~8 s on a busy 2-core box); the decision itself is tested above
def test_a_booking_gets_the_booking_call_with_valid_arguments(models: ModelSet) -> None:
    result = models.llm.generate(
        [PLAIN, ChatMessage("user", "Book a table for two at Luigi's at 7 pm.")],
        60,
        lambda: False,
        lambda piece: None,
        GenerationOptions(tools=TOOLS, tool_choice="auto"),
    )
    assert [c.name for c in result.tool_calls] == ["book_table"], result
    arguments = json.loads(result.tool_calls[0].arguments)
    jsonschema.validate(arguments, BOOK.parameters)
    assert "luigi" in arguments["restaurant"].lower() and arguments["people"] == 2, arguments


def test_a_question_for_words_gets_words_that_recite_no_tool(models: ModelSet) -> None:
    pieces: list[str] = []
    result = models.llm.generate(
        [PLAIN, ChatMessage("user", "How many legs does a spider have?")],
        24,
        lambda: False,
        pieces.append,
        GenerationOptions(tools=TOOLS, tool_choice="auto"),
    )
    assert not result.tool_calls and result.text.strip() and "".join(pieces) == result.text, result
    assert not any(mark in result.text.lower() for mark in TOOL_TEXT), result.text


def test_required_picks_the_tool_the_question_needs(models: ModelSet) -> None:
    decision = models.llm.decide_tool(  # type: ignore[attr-defined]
        [PLAIN, ChatMessage("user", "Reserve a table for four at Sakura tonight at eight.")],
        GenerationOptions(tools=TOOLS, tool_choice="required"),
    )
    assert decision.tool == "book_table" and decision.call_probability == 1.0 and WORDS not in decision.scores


def test_none_and_named_choices_make_no_decision(models: ModelSet) -> None:
    messages = [PLAIN, ChatMessage("user", "What's the weather in Rome?")]
    for choice in ("none", "book_table"):
        assert models.llm.decide_tool(messages, GenerationOptions(tools=TOOLS, tool_choice=choice)) is None  # type: ignore[attr-defined]
