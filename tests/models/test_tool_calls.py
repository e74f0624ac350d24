"""Function calling on the real default model: calls constrained by the tools' JSON schemas."""

from __future__ import annotations

import json

import jsonschema
import pytest

from gateway.config import GatewayConfig
from gateway.models.base import (
    ChatMessage,
    FunctionTool,
    Generation,
    GenerationOptions,
    LanguageModelError,
    ModelSet,
    ToolCall,
)
from gateway.models.tool_calls import call_schema, classify_start, parse_call

SYSTEM = ChatMessage("system", GatewayConfig().instructions)
WEATHER = FunctionTool(
    "get_weather",
    "Current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
)
TIMER = FunctionTool(
    "set_timer",
    "Start a countdown timer",
    {"type": "object", "properties": {"minutes": {"type": "integer", "minimum": 1}}, "required": ["minutes"]},
)
TOOLS = [WEATHER, TIMER]


def run(models: ModelSet, messages: list[ChatMessage], choice: str = "auto") -> tuple[Generation, list[str]]:
    pieces: list[str] = []
    options = GenerationOptions(tools=TOOLS, tool_choice=choice)
    return models.llm.generate([SYSTEM, *messages], 60, lambda: False, pieces.append, options), pieces


def check(call: ToolCall) -> dict:
    tool = next(t for t in TOOLS if t.name == call.name)
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, tool.parameters)
    assert call.call_id.startswith("call_") and len(call.call_id) > 10
    return arguments


def test_a_request_that_needs_a_tool_gets_a_valid_call(models: ModelSet) -> None:
    result, pieces = run(models, [ChatMessage("user", "What's the weather like in Paris right now?")])
    assert result.finish_reason == "tool_calls" and len(result.tool_calls) == 1, result
    assert result.tool_calls[0].name == "get_weather"
    assert check(result.tool_calls[0])["city"].lower() == "paris"
    assert pieces == [], "call text is never streamed as speech"


def test_a_plain_question_gets_text(models: ModelSet) -> None:
    result, pieces = run(models, [ChatMessage("user", "What is the capital of Japan?")])
    assert result.finish_reason == "stop" and not result.tool_calls
    assert "tokyo" in result.text.lower() and "".join(pieces) == result.text


@pytest.mark.slow  # several constrained calls (~15 s); CI runs it with -m slow
def test_required_and_named_choices_always_call(models: ModelSet) -> None:
    required, _ = run(models, [ChatMessage("user", "Hello!")], choice="required")
    assert required.tool_calls and check(required.tool_calls[0]) is not None
    named, _ = run(models, [ChatMessage("user", "Please set a timer for ten minutes.")], choice="set_timer")
    assert [c.name for c in named.tool_calls] == ["set_timer"]
    assert check(named.tool_calls[0])["minutes"] == 10


def test_choice_none_answers_in_text(models: ModelSet) -> None:
    result, _ = run(models, [ChatMessage("user", "What's the weather like in Paris right now?")], choice="none")
    assert not result.tool_calls and result.text.strip()


@pytest.mark.slow  # a call and then an answer from its output (~12 s on a busy 2-core box)
def test_the_call_output_is_used_in_the_answer(models: ModelSet) -> None:
    call = ToolCall("call_abc123", "get_weather", '{"city": "Paris"}')
    messages = [
        ChatMessage("user", "What's the weather like in Paris right now?"),
        ChatMessage("assistant", "", tool_calls=[call]),
        ChatMessage("tool", '{"temperature_c": 18, "sky": "light rain"}', tool_call_id="call_abc123"),
    ]
    result, _ = run(models, messages)
    assert not result.tool_calls, result
    assert "18" in result.text or "eighteen" in result.text.lower(), result
    assert "rain" in result.text.lower(), result


def test_a_tool_choice_naming_no_tool_is_an_error(models: ModelSet) -> None:
    with pytest.raises(LanguageModelError, match="not one of the tools"):
        run(models, [ChatMessage("user", "hi")], choice="launch_rocket")


def test_call_helpers() -> None:
    assert classify_start("  <tool") is None and classify_start("```json") is True and classify_start("The") is False
    names = ("get_weather", "set_timer")
    assert classify_start("get_wea", names) is None and classify_start('get_weather(city="Paris")', names) is True
    assert classify_start("get going", names) is False and classify_start("Get_weather(", names) is False
    assert parse_call('{"name": "f", "arguments": {"a": 1}} trailing') == ("f", {"a": 1})
    assert call_schema([WEATHER])["properties"]["name"] == {"const": "get_weather"}
    assert len(call_schema(TOOLS)["oneOf"]) == 2


def test_a_prompt_ending_in_a_tool_output_asks_for_the_answer(models: ModelSet) -> None:
    from gateway.models.llama_cpp.llm import LlamaCppLanguageModel
    from gateway.models.tool_calls import ANSWER_CUE

    assert isinstance(models.llm, LlamaCppLanguageModel)
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    history = [
        SYSTEM,
        ChatMessage("user", "Weather in Paris?"),
        ChatMessage("assistant", "", tool_calls=[call]),
        ChatMessage("tool", '{"temperature_c": 31}', tool_call_id="call_1"),
    ]
    options = GenerationOptions(tools=TOOLS)
    prompt = models.llm.chat.render(history, options)
    assert prompt.index("</tool_response>") < prompt.index(ANSWER_CUE), prompt
    later = models.llm.chat.render([*history, ChatMessage("assistant", "It is 31 degrees.")], options)
    assert ANSWER_CUE not in later and later.startswith(prompt[: prompt.index(ANSWER_CUE) - 30])


# A call made and then the reply in words (~20 s on a busy 2-core box); a valid call stays in the default run.
@pytest.mark.slow
def test_a_call_written_as_code_is_made_not_spoken(models: ModelSet, monkeypatch: pytest.MonkeyPatch) -> None:
    """A code model given tools may write a call as code (over WebRTC, "1 2 3" got the reply
    ``1. get_weather(city="New York")`` from it), below the call threshold. A reply that starts so
    must become a call under the tools' grammar, never speech. The model's first tokens are forced
    to ``get_weather(`` here; the rest is the real model (on this question it opens no call by
    itself: the plain-question test)."""
    import gateway.models.llama_cpp.generation_run as engine_module
    from gateway.models.llama_cpp.llm import LlamaCppLanguageModel

    assert isinstance(models.llm, LlamaCppLanguageModel)
    forced = list(models.llm._llm.tokenize(b"get_weather(", add_bos=False))
    real = engine_module.sample_token

    def writes_code_first(logits, *args, **kwargs):  # type: ignore[no-untyped-def]
        return forced.pop(0) if forced else real(logits, *args, **kwargs)

    monkeypatch.setattr(engine_module, "sample_token", writes_code_first)
    result, pieces = run(models, [ChatMessage("user", "What is the capital of Japan?")])
    assert pieces == [] and result.finish_reason == "tool_calls", (pieces, result)
    assert result.tool_calls[0].name == "get_weather" and check(result.tool_calls[0]) is not None


SHOPPING = FunctionTool(
    "add_to_shopping_list",
    "Add an item to the shopping list.",
    {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
)
MILK = [SYSTEM, ChatMessage("user", "Add milk to my shopping list.")]


@pytest.mark.slow  # a constrained call on the real model
def test_a_call_cut_short_reaches_the_caller_as_no_call(models: ModelSet, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compute budget runs out once the call's body reads ``{"arguments": {"item": "milk`` (a
    loaded box: the body once ended there). The caller gets an incomplete response with no call and
    no words: never a call with broken arguments."""
    from gateway.models.llama_cpp.generation_run import GenerationRun

    def out_once_milk_is_written(self: GenerationRun) -> bool:
        return '"milk' in "".join(text for text, _ in self.call_pieces)

    monkeypatch.setattr(GenerationRun, "over_budget", out_once_milk_is_written)
    pieces: list[str] = []
    options = GenerationOptions(tools=[SHOPPING], tool_choice="auto")
    result = models.llm.generate(MILK, 60, lambda: False, pieces.append, options)
    assert result.tool_calls == [] and result.finish_reason == "budget" and result.status == "incomplete", result
    assert pieces == [] and result.text == "", "no call text is ever said"


@pytest.mark.slow  # a constrained call on the real model
def test_a_call_never_takes_a_control_token_into_its_arguments(
    models: ModelSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failed before: llama.cpp's grammar lets a control token (``<|im_start|>``: no text, it
    detokenizes to nothing) into a JSON string, so a model leaning to one after ``"milk`` wrote it
    there unseen: the body showed nothing after ``"milk`` while the call went on (or ran to its token
    cap). The model is pushed to ``<|im_start|>`` there; the call must take a text token instead."""
    from gateway.models.llama_cpp.generation_run import GenerationRun

    llm = models.llm._llm  # type: ignore[attr-defined]
    start = llm.tokenize(b"<|im_start|>", add_bos=False, special=True)[0]
    controls = set(models.llm.chat.control_tokens().tolist())  # type: ignore[attr-defined]
    assert start in controls
    real = GenerationRun.evaluate
    milk_at: list[int] = []  # the call's length when it had written milk
    taken: list[int] = []  # the call's tokens after that

    def leaning_to_a_control_token(self: GenerationRun, tokens: list[int]):  # type: ignore[no-untyped-def]
        if milk_at:
            taken[:] = tokens[milk_at[0] :]
        logits = real(self, tokens)
        if logits is not None and not milk_at and llm.detokenize(tokens[-1:]).endswith(b"ilk"):
            milk_at.append(len(tokens))
            logits = logits.copy()
            logits[start] = logits.max() + 10.0
        return logits

    monkeypatch.setattr(GenerationRun, "evaluate", leaning_to_a_control_token)
    options = GenerationOptions(tools=[SHOPPING], tool_choice="add_to_shopping_list")
    result = models.llm.generate(MILK, 60, lambda: False, lambda piece: None, options)
    assert milk_at and taken, "the call wrote milk and went on"
    assert not controls & set(taken), [llm.detokenize([t], special=True) for t in taken]
    assert [c.name for c in result.tool_calls] == ["add_to_shopping_list"], result
    assert json.loads(result.tool_calls[0].arguments)["item"].lower().startswith("milk"), result
