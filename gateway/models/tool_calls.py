"""Function calling helpers shared by the LLM engines: prompt shapes, call detection, call parsing.

Tool calls follow the Hermes / Qwen2.5 convention that chat templates with tool support render: the
tools are listed in the system turn, and the model answers a call as::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Small models also start a call as a fenced block (`````json {...}`````) or a bare JSON object; a
reply whose first characters are one of :data:`CALL_OPENERS` is taken as a call, and the llama.cpp
engine then generates it as a bare JSON object under a grammar built from :func:`call_schema`, so
that the name is one of the tools and the arguments validate against its ``parameters`` schema.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Optional

from gateway.models.base import TOOL_CHOICES, ChatMessage, FunctionTool

CALL_OPENERS = ("<tool_call>", "```", "{")  # a reply starting so is a call
# The user-side line after a tool output that ends the prompt (see :func:`cue_answer`).
ANSWER_CUE = "Answer me from the function result above, in words."
CALL_PREFIX = "<tool_call>\n"  # what a constrained call is generated after
CALL_SUFFIX = "\n</tool_call>"


def new_call_id() -> str:
    """A fresh ``call_id`` in OpenAI's shape (``call_`` + 24 hex digits)."""
    return "call_" + secrets.token_hex(12)


def tools_for_request(tools: list[FunctionTool]) -> list[dict[str, Any]]:
    """``tools`` in the Chat Completions shape (``{"type": "function", "function": {...}}``), as
    chat templates and OpenAI-compatible servers take them."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def check_tool_choice(tools: list[FunctionTool], choice: str) -> None:
    """Raise ValueError unless ``choice`` is auto/none/required or the name of one of ``tools``."""
    if choice in TOOL_CHOICES:
        if choice == "required" and not tools:
            raise ValueError("tool_choice 'required' needs at least one tool")
        return
    if choice not in {t.name for t in tools}:
        raise ValueError(f"tool_choice names {choice!r}, which is not one of the tools")


def allowed_tools(tools: list[FunctionTool], choice: str) -> list[FunctionTool]:
    """The tools a call may use under ``choice`` (none for "none")."""
    if choice == "none":
        return []
    if choice in TOOL_CHOICES:
        return list(tools)
    return [t for t in tools if t.name == choice]


def call_schema(tools: list[FunctionTool]) -> dict[str, Any]:
    """JSON Schema of one call ``{"name": ..., "arguments": {...}}`` of any of ``tools``."""
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": _object_schema(t.parameters)},
            "required": ["name", "arguments"],
        }
        for t in tools
    ]
    return variants[0] if len(variants) == 1 else {"oneOf": variants}


def _object_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    schema = dict(parameters or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def classify_start(text: str, names: tuple[str, ...] = ()) -> Optional[bool]:
    """True when the reply so far opens a call, False when it is plain text, None while its
    first non-blank characters could still be either.

    ``names``: the tools' names; a reply starting ``name(`` opens a call too (a code model given
    tools may write ``get_weather(city="Paris")`` as its reply, which must never be spoken)."""
    head = text.lstrip()
    if not head:
        return None
    for opener in (*CALL_OPENERS, *(name + "(" for name in names)):
        if head.startswith(opener):
            return True
        if opener.startswith(head):
            return None
    return False


def parse_call(text: str) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of a generated call object; ValueError when it is not one."""
    decoded, _ = json.JSONDecoder().raw_decode(text.strip())
    if not isinstance(decoded, dict) or not isinstance(decoded.get("name"), str):
        raise ValueError(f"not a tool call: {text!r}")
    arguments = decoded.get("arguments", {})
    if isinstance(arguments, str):
        arguments = json.loads(arguments or "{}")
    if not isinstance(arguments, dict):
        raise ValueError(f"tool call arguments are not an object: {text!r}")
    return decoded["name"], arguments


def complete_json(text: str) -> bool:
    """True once ``text`` holds one whole JSON value (a constrained call is finished)."""
    try:
        json.JSONDecoder().raw_decode(text.strip())
    except ValueError:
        return False
    return True


def template_message(message: ChatMessage) -> dict[str, Any]:
    """``message`` as a chat-template dict: assistant calls with parsed ``arguments`` objects (the
    Qwen2.5 template serialises them itself), tool outputs with their ``tool_call_id``."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": _loads_object(c.arguments)}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _loads_object(arguments: str) -> Any:
    """``arguments`` decoded for the template; as it is (a string) when it is no JSON, or JSON
    nested past the parser's recursion limit (a client's ``function_call`` item can hold anything:
    it used to make every later response of its session fail)."""
    try:
        return json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return arguments


def plain_tool_prompt(tools: list[FunctionTool]) -> str:
    """Text to append to the system turn for a model whose chat template knows no tools."""
    listed = "\n".join(json.dumps(entry) for entry in tools_for_request(tools))
    return (
        "\n\nYou may call one of these functions when the user's request needs it:\n<tools>\n" + listed + "\n</tools>\n"
        "To call one, reply only with <tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def flatten_for_plain_template(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Messages for a template without tool support: assistant calls and tool outputs as text."""
    flat: list[ChatMessage] = []
    for m in messages:
        if m.tool_calls:
            calls = "\n".join(
                CALL_PREFIX + json.dumps({"name": c.name, "arguments": _loads_object(c.arguments)}) + CALL_SUFFIX
                for c in m.tool_calls
            )
            flat.append(ChatMessage("assistant", (m.content + "\n" + calls).strip()))
        elif m.role == "tool":
            flat.append(ChatMessage("user", f"<tool_response>\n{m.content}\n</tool_response>"))
        else:
            flat.append(ChatMessage(m.role, m.content))
    return flat


def cue_answer(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages``, plus :data:`ANSWER_CUE` as a user message when the last one is a tool output.

    Qwen2.5's chat template renders a tool output as a user turn holding only
    ``<tool_response>...</tool_response>``; Qwen2.5-Coder, not trained on that tag, takes it for
    pasted markup unless the instructions name the tool: it repeats the call (call probability
    0.42-0.49 with "You are a helpful assistant.") or echoes the ``<tools>`` listing. With the cue
    it speaks the output (measured: 8 of 8 prompts, call probability <= 0.01; ``scripts/bench_tools.py``
    "answer uses the tool output"). Only the prompt's tail changes: the next turn's prompt, which
    has the answer after the output instead, keeps the cached prefix up to the output."""
    if messages and messages[-1].role == "tool":
        return [*messages, ChatMessage("user", ANSWER_CUE)]
    return messages
