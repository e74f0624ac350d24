"""What one Realtime session may ask of the shared LLM engine: size limits on what it sends.

One engine serves every call of the process (``gateway.models.compute.engine_queue``), so a caller who
sends a huge prompt makes everyone wait. The limits below bound what a session can put into a
prompt; an event that would pass one gets an ``error`` naming the limit and changes nothing (the
call goes on). The engine then fits what is left into its context by dropping the oldest turns
(``gateway.models.llama_cpp.prompt_fit``), stops a response within one token of a cancel, and gives each
response a compute budget (``llm_turn_budget_s``).

Error codes follow OpenAI's for the same checks: ``string_above_max_length`` (a string field too
long), ``array_above_max_length`` (too many tools or ``response.input`` entries), and
``limit_exceeded`` for the gateway's own limits (a tool definition too large, a conversation too
long). ``param`` is the field's path.

The defaults are those of the ``GatewayConfig`` fields of the same names (``--max-instructions-chars``...),
taken from there (``config_default``): one home for each.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from gateway.config import config_default
from gateway.realtime.items import ClientError


@dataclass(frozen=True)
class SessionLimits:
    """Per-session limits. Characters are Python ``str`` characters; bytes are of the UTF-8 JSON.

    ``max_instructions_chars``: ``instructions`` of ``session.update`` or ``response.create``.
    ``max_tools``: tools per session or per response. ``max_tool_bytes``: one tool definition
    (name, description and ``parameters`` schema) as compact JSON; ``max_tools_bytes``: all of a
    session's or response's tools together (every one is listed in the call decision's prompt and
    echoed in each ``session.updated``; the default is already more than a 4096-token context holds).
    ``max_item_chars``: the text of one conversation item (all its text parts, a call's ``arguments``,
    a call output's ``output``).
    ``max_conversation_items``: items a client may hold in the conversation (``conversation.item.create``
    beyond it is refused; items the server adds for spoken turns and replies push out the oldest),
    and the entries of a ``response.input``.
    ``max_prompt_chars``: characters of conversation the prompt builder hands the engine (oldest
    turns dropped first; the engine then fits the prompt to its context in tokens).
    """

    max_instructions_chars: int = config_default("max_instructions_chars")
    max_tools: int = config_default("max_tools")
    max_tool_bytes: int = config_default("max_tool_bytes")
    max_tools_bytes: int = config_default("max_tools_bytes")
    max_item_chars: int = config_default("max_item_chars")
    max_conversation_items: int = config_default("max_conversation_items")
    max_prompt_chars: int = config_default("max_prompt_chars")

    @classmethod
    def from_config(cls, config: Any) -> SessionLimits:
        """The limits a ``GatewayConfig`` (or any object with fields of these names) sets; a
        missing field keeps its default here."""
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{name: int(getattr(config, name)) for name in names if hasattr(config, name)})

    def check_instructions(self, text: str, param: str) -> None:
        """ClientError ``string_above_max_length`` when ``text`` is over ``max_instructions_chars``."""
        check_length(text, self.max_instructions_chars, param)

    def check_tool_count(self, count: int, param: str) -> None:
        """ClientError ``array_above_max_length`` for more than ``max_tools`` tools."""
        check_array_length(count, self.max_tools, param)

    def check_tool_size(self, tool: dict, param: str) -> int:
        """ClientError ``limit_exceeded`` when the tool definition is over ``max_tool_bytes``;
        else its size (bytes of compact UTF-8 JSON)."""
        size = len(json.dumps(tool, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if size > self.max_tool_bytes:
            raise ClientError(
                f"Invalid '{param}': the tool definition is {size} bytes of JSON; the limit is "
                f"{self.max_tool_bytes} bytes (max_tool_bytes).",
                "limit_exceeded",
                param,
            )
        return size

    def check_tools_size(self, size: int, param: str) -> None:
        """ClientError ``limit_exceeded`` when all the tools (``size`` bytes of compact JSON
        together) are over ``max_tools_bytes``."""
        if size > self.max_tools_bytes:
            raise ClientError(
                f"Invalid '{param}': the tool definitions are {size} bytes of JSON together; the limit is "
                f"{self.max_tools_bytes} bytes (max_tools_bytes).",
                "limit_exceeded",
                param,
            )

    @property
    def max_item_bytes(self) -> int:
        """The most bytes of compact JSON one item may have: its text at the limit, every
        character escaped (6 bytes), and 16 KiB for its ids and fields."""
        return 6 * self.max_item_chars + 16 * 1024

    def check_item(self, item: dict, param: str) -> None:
        """ClientError ``string_above_max_length`` when the item's text is over ``max_item_chars``
        (``param`` names the item; the error names the field that holds the text), ``limit_exceeded``
        when the whole item is over :attr:`max_item_bytes`: an item is kept as sent and echoed
        (``conversation.item.added``, ``.done``, ``.retrieve``), and nothing but its text bounded it
        (a 6 MB ``input_audio`` part, whose audio is never transcribed here, or any extra field)."""
        for key in ("arguments", "output"):
            if isinstance(item.get(key), str):
                check_length(item[key], self.max_item_chars, f"{param}.{key}")
        texts = [
            part.get(key)
            for part in item.get("content") or []
            if isinstance(part, dict)
            for key in ("text", "transcript")
        ]
        total = sum(len(text) for text in texts if isinstance(text, str))
        if total > self.max_item_chars:
            raise ClientError(
                f"Invalid '{param}.content': string too long. Expected text of maximum length "
                f"{self.max_item_chars}, but got text of length {total} instead.",
                "string_above_max_length",
                f"{param}.content",
            )
        size = len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > self.max_item_bytes:
            raise ClientError(
                f"Invalid '{param}': the item is {size} bytes of JSON; the limit is {self.max_item_bytes} bytes "
                "(6 x max_item_chars + 16 KiB). Audio in an item is not transcribed here: send the caller's "
                "audio with input_audio_buffer.append.",
                "limit_exceeded",
                param,
            )

    def check_input_count(self, count: int, param: str) -> None:
        """ClientError ``array_above_max_length`` for a ``response.input`` of more than
        ``max_conversation_items`` entries (no more than a conversation holds): each
        ``item_reference`` costs a few bytes of the event and the referenced item's whole text in
        the prompt built from it, so 130 000 references to one 32 KB item in an 8 MB event
        made 4 GB of prompt text, on the event loop, before the prompt was cut to its limit."""
        check_array_length(count, self.max_conversation_items, param)

    def check_room(self, items: int) -> None:
        """ClientError ``limit_exceeded`` when a conversation of ``items`` items has no room for one more."""
        if items >= self.max_conversation_items:
            raise ClientError(
                f"The conversation already holds {items} items, the most a session may have "
                f"(max_conversation_items {self.max_conversation_items}); delete some with "
                "conversation.item.delete first.",
                "limit_exceeded",
                "item",
            )


def check_length(text: str, limit: int, param: str) -> None:
    """ClientError ``string_above_max_length`` when ``text`` has more than ``limit`` characters."""
    if len(text) > limit:
        raise ClientError(
            f"Invalid '{param}': string too long. Expected a string with maximum length {limit}, "
            f"but got a string with length {len(text)} instead.",
            "string_above_max_length",
            param,
        )


def check_array_length(count: int, limit: int, param: str) -> None:
    """ClientError ``array_above_max_length`` (OpenAI's words) for an array of more than ``limit`` entries."""
    if count > limit:
        raise ClientError(
            f"Invalid '{param}': array too long. Expected an array with maximum length {limit}, "
            f"but got an array with length {count} instead.",
            "array_above_max_length",
            param,
        )
