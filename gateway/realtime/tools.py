"""Function calling in the Realtime protocol: ``tools`` and ``tool_choice`` (of ``session.update``
and of ``response.create``'s ``response``), and the ``function_call`` / ``function_call_output``
conversation items.

Reference: the OpenAI Realtime API (GA and beta share these shapes): a tool is
``{"type": "function", "name", "description", "parameters"}`` with ``parameters`` a JSON Schema
object; ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function", "name"}``.
A call the model makes is a ``function_call`` item (``call_id``, ``name``, ``arguments``: JSON text);
the client answers it with a ``function_call_output`` item (``call_id``, ``output``) and a
``response.create``. Problems raise :class:`ClientError` naming the field (``param``).

The engine gets the tools as :class:`~gateway.models.base.FunctionTool` and the choice as the string
``GenerationOptions.tool_choice`` takes (a named function becomes its name).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Optional, Union

from gateway.models.base import TOOL_CHOICES, FunctionTool
from gateway.realtime.events import new_id
from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits

# "auto" | "none" | "required" | {"type": "function", "name": str}: the client's form, kept for views.
ToolChoice = Union[str, dict]

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names
_SCHEMA_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}


def parse_tools(raw: Any, param: str, limits: SessionLimits) -> list[FunctionTool]:
    """``tools`` as the client sent it (``param``: ``session.tools`` or ``response.tools``)."""
    if not isinstance(raw, list):
        raise ClientError(f"Invalid type for '{param}': expected an array of tools.", "invalid_type", param)
    limits.check_tool_count(len(raw), param)
    tools: list[FunctionTool] = []
    total = 0  # bytes of the tools' JSON so far
    for index, entry in enumerate(raw):
        tool = _parse_tool(entry, f"{param}[{index}]")
        total += limits.check_tool_size(entry, f"{param}[{index}]")
        limits.check_tools_size(total, param)
        if any(t.name == tool.name for t in tools):
            raise ClientError(
                f"Invalid '{param}[{index}].name': a tool named '{tool.name}' is already listed.",
                "invalid_value",
                f"{param}[{index}].name",
            )
        tools.append(tool)
    return tools


def _parse_tool(entry: Any, param: str) -> FunctionTool:
    if not isinstance(entry, dict):
        raise ClientError(f"Invalid type for '{param}': expected a tool object.", "invalid_type", param)
    if entry.get("type", "function") != "function":
        raise ClientError(
            f"Invalid value for '{param}.type': only 'function' tools are supported here.",
            "invalid_value",
            f"{param}.type",
        )
    name = entry.get("name")
    if name is None:
        hint = " (send the Realtime shape: 'name' beside 'type', not inside 'function')" if "function" in entry else ""
        raise ClientError(
            f"Missing required parameter: '{param}.name'{hint}.", "missing_required_parameter", f"{param}.name"
        )
    if not isinstance(name, str) or not FUNCTION_NAME.match(name):
        raise ClientError(
            f"Invalid value for '{param}.name': 1 to 64 letters, digits, '_' or '-'.", "invalid_value", f"{param}.name"
        )
    description = entry.get("description", "")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise ClientError(
            f"Invalid type for '{param}.description': expected a string.", "invalid_type", f"{param}.description"
        )
    parameters = entry.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    check_parameters_schema(parameters, f"{param}.parameters")
    return FunctionTool(name, description, parameters)


def check_parameters_schema(schema: Any, param: str) -> None:
    """A function's ``parameters``: a JSON Schema object of ``type`` "object" whose ``properties``
    are schemas and whose ``required`` names are strings. Deeper keywords are left to the engine
    (llama.cpp turns the schema into a grammar, and reports one it cannot take when it is used)."""
    if not isinstance(schema, dict):
        raise ClientError(f"Invalid type for '{param}': expected a JSON Schema object.", "invalid_type", param)
    if schema.get("type", "object") != "object":
        raise ClientError(
            f"Invalid value for '{param}.type': function parameters must be of type 'object'.",
            "invalid_value",
            f"{param}.type",
        )
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise ClientError(
            f"Invalid type for '{param}.properties': expected an object.", "invalid_type", f"{param}.properties"
        )
    for key, sub in properties.items():
        _check_subschema(sub, f"{param}.properties.{key}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ClientError(
            f"Invalid type for '{param}.required': expected an array of strings.", "invalid_type", f"{param}.required"
        )


def _check_subschema(schema: Any, param: str) -> None:
    if not isinstance(schema, dict):
        raise ClientError(f"Invalid type for '{param}': expected a JSON Schema object.", "invalid_type", param)
    kinds = schema.get("type")
    names = kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []
    if not all(isinstance(kind, str) and kind in _SCHEMA_TYPES for kind in names):
        raise ClientError(
            f"Invalid value for '{param}.type': must be one of {', '.join(sorted(_SCHEMA_TYPES))}.",
            "invalid_value",
            f"{param}.type",
        )


def parse_tool_choice(raw: Any, param: str) -> ToolChoice:
    """``tool_choice``: one of the three strings or ``{"type": "function", "name": ...}``."""
    if isinstance(raw, str):
        if raw not in TOOL_CHOICES:
            raise ClientError(
                f"Invalid value for '{param}': expected 'auto', 'none', 'required' or "
                "{'type': 'function', 'name': ...}.",
                "invalid_value",
                param,
            )
        return raw
    if isinstance(raw, dict) and raw.get("type") == "function":
        name = raw.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.match(name):
            raise ClientError(
                f"Invalid value for '{param}.name': the name of one of the tools.", "invalid_value", f"{param}.name"
            )
        return {"type": "function", "name": name}
    raise ClientError(
        f"Invalid value for '{param}': expected 'auto', 'none', 'required' or {{'type': 'function', 'name': ...}}.",
        "invalid_value",
        param,
    )


def check_choice(choice: ToolChoice, tools: list[FunctionTool], param: str) -> None:
    """A named ``choice`` must name one of ``tools`` (``param``: where the choice was set)."""
    if isinstance(choice, dict) and choice["name"] not in {t.name for t in tools}:
        raise ClientError(
            f"Invalid value for '{param}': '{choice['name']}' is not one of the tools.", "invalid_value", param
        )


def engine_tool_choice(choice: ToolChoice, tools: list[FunctionTool]) -> str:
    """The ``GenerationOptions.tool_choice`` string: "none" when there is nothing to call."""
    if not tools:
        return "none"
    return choice["name"] if isinstance(choice, dict) else choice


def tools_view(tools: Sequence[FunctionTool]) -> list[dict]:
    """``tools`` as session objects show them."""
    return [
        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
    ]


def tool_choice_view(choice: ToolChoice) -> ToolChoice:
    """``tool_choice`` as session objects show it (a copy)."""
    return dict(choice) if isinstance(choice, dict) else choice


def function_call_item(
    call_id: str, name: str, arguments: str, status: str = "completed", item_id: Optional[str] = None
) -> dict:
    """A ``function_call`` conversation item (``realtime.item``)."""
    return {
        "id": item_id or new_id("item"),
        "object": "realtime.item",
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
