"""``response.create``: validation of its ``response`` object (GA and beta field names).

Reference: the OpenAI Realtime API client event ``response.create`` (``output_modalities`` or beta
``modalities``, ``conversation``, ``instructions``, ``metadata``, ``input``, ``max_output_tokens`` or
beta ``max_response_output_tokens``, ``tools``, ``tool_choice``; beta ``temperature``, a number,
accepted and not used, as the session's). Problems raise :class:`ClientError` naming the field;
sizes are checked against the conversation's ``SessionLimits``. A number that is not finite
(``NaN``, ``Infinity``, ``1e999``) never gets here: the door refuses it in any event, naming its
path (``gateway.realtime.client_messages``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gateway.models.base import FunctionTool
from gateway.realtime.conversation import Conversation, PromptSpec
from gateway.realtime.items import ClientError, is_int
from gateway.realtime.session_config import MAX_OUTPUT_TOKENS
from gateway.realtime.session_settings import SessionSettings
from gateway.realtime.tools import check_choice, engine_tool_choice, parse_tool_choice, parse_tools


@dataclass
class ResponseParams:
    """A checked ``response`` object: the prompt's sources, spoken or written, whether the reply
    joins the conversation (``conversation: "auto"``), its own token cap (None: the session's), and
    the tools it may call with the engine's ``tool_choice`` string (the response's own, else the
    session's)."""

    prompt: PromptSpec
    audio: bool
    conversation: bool
    metadata: Optional[dict]
    max_tokens: Optional[int]
    tools: list[FunctionTool] = field(default_factory=list)
    tool_choice: str = "none"


def parse_response_params(params: dict, settings: SessionSettings, conversation: Conversation) -> ResponseParams:
    """Check a ``response`` object; item references in ``input`` are resolved in ``conversation``."""
    audio = _response_audio(params, settings)
    mode = params.get("conversation", "auto")
    if mode not in ("auto", "none"):
        raise ClientError("'response.conversation' must be 'auto' or 'none'.", "invalid_value", "response.conversation")
    instructions = params.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ClientError("'response.instructions' must be a string.", "invalid_type", "response.instructions")
    if instructions is not None:
        conversation.limits.check_instructions(instructions, "response.instructions")
    metadata = params.get("metadata")
    if metadata is not None:
        check_metadata(metadata)
    _check_temperature(params)
    tools, choice = _response_tools(params, settings, conversation)
    spec = PromptSpec(instructions, conversation.resolve_input(params.get("input")), mode == "auto")
    return ResponseParams(spec, audio, mode == "auto", metadata, _response_tokens(params, settings), tools, choice)


# OpenAI's ``metadata`` (the Metadata object of its API): at most 16 pairs of strings, keys of at
# most 64 characters, values of at most 512. Echoed in ``response.created`` and ``response.done``, so
# a larger one made the gateway send its client twice what it sent (7 MB in, 14 MB out).
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512


def check_metadata(metadata: object) -> None:
    """ClientError unless ``metadata`` is an object of at most :data:`MAX_METADATA_PAIRS` string
    pairs within the key and value lengths (``param`` ``response.metadata``)."""
    param = "response.metadata"
    if not isinstance(metadata, dict):
        raise ClientError("'response.metadata' must be an object.", "invalid_type", param)
    if len(metadata) > MAX_METADATA_PAIRS:
        raise ClientError(
            f"Invalid '{param}': at most {MAX_METADATA_PAIRS} key-value pairs, got {len(metadata)}.",
            "invalid_value",
            param,
        )
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise ClientError(f"Invalid '{param}': each value must be a string.", "invalid_type", param)
        if len(key) > MAX_METADATA_KEY_CHARS or len(value) > MAX_METADATA_VALUE_CHARS:
            raise ClientError(
                f"Invalid '{param}': keys may have up to {MAX_METADATA_KEY_CHARS} characters and values up to "
                f"{MAX_METADATA_VALUE_CHARS}.",
                "string_above_max_length",
                param,
            )


def _response_tools(params: dict, settings: SessionSettings, conversation: Conversation) -> tuple[list, str]:
    """The response's tools and engine tool_choice: ``response.tools`` / ``response.tool_choice``
    when given (``tools: []`` clears the session's for this response), else the session's."""
    tools = list(settings.call.tools)
    if params.get("tools") is not None:
        tools = parse_tools(params["tools"], "response.tools", conversation.limits)
    choice = settings.tool_choice
    if params.get("tool_choice") is not None:
        choice = parse_tool_choice(params["tool_choice"], "response.tool_choice")
    param = "response.tool_choice" if params.get("tool_choice") is not None else "session.tool_choice"
    check_choice(choice, tools, param)
    return tools, engine_tool_choice(choice, tools)


def _response_audio(params: dict, settings: SessionSettings) -> bool:
    modalities = params.get("output_modalities", params.get("modalities"))
    if modalities is None:
        return settings.audio
    if not isinstance(modalities, list) or not modalities or not set(modalities) <= {"audio", "text"}:
        key = "modalities" if "modalities" in params else "output_modalities"
        raise ClientError(
            f"'response.{key}' must be a list of 'audio' and/or 'text'.", "invalid_value", f"response.{key}"
        )
    return "audio" in modalities


def _check_temperature(params: dict) -> None:
    """ClientError unless ``temperature`` is absent, null or a number (not a bool, not a string),
    said as the session config's validation says it for ``session.temperature``."""
    temperature = params.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))):
        param = "response.temperature"
        raise ClientError(f"Invalid value for '{param}': Input should be a valid number", "invalid_value", param)


def _response_tokens(params: dict, settings: SessionSettings) -> Optional[int]:
    key = "max_output_tokens" if "max_output_tokens" in params else "max_response_output_tokens"
    tokens = params.get(key)
    if tokens is None:
        return None
    if tokens != "inf" and (not is_int(tokens) or not 1 <= tokens <= MAX_OUTPUT_TOKENS):
        raise ClientError(
            f"'response.{key}' must be 1..{MAX_OUTPUT_TOKENS} or 'inf'.", "invalid_value", f"response.{key}"
        )
    return settings.cap_tokens(tokens)
