"""``llm_warm_session``: the app's session (instructions and tools) is read into the real LLM at
start-up, before the port opens, so the first call with it finds its prompt read; a file that
is not a valid session object stops the gateway from starting, naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions
from gateway.models.llama_cpp.llm import LlamaCppLanguageModel
from gateway.server.app import create_app
from tests.helpers import serve

# Tools no other test uses: no KV cells hold their schemas before this test.
PARCEL = {
    "type": "function",
    "name": "track_parcel",
    "description": "Where a parcel is now, by its tracking number.",
    "parameters": {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]},
}
FERRY = {
    "type": "function",
    "name": "ferry_times",
    "description": "The next ferries between two harbours.",
    "parameters": {
        "type": "object",
        "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
        "required": ["from", "to"],
    },
}
INSTRUCTIONS = "You answer questions about parcels for a courier, briefly."


def tool(raw: dict) -> FunctionTool:
    return FunctionTool(raw["name"], raw["description"], raw["parameters"])


def held(llm: LlamaCppLanguageModel, tools: list[dict]) -> bool:
    """Whether the engine holds the prompt a session with ``INSTRUCTIONS`` and ``tools`` starts
    with: ``prepare`` reads nothing then (a warm it starts is let go at once)."""
    warm = llm.prepare([ChatMessage("system", INSTRUCTIONS)], GenerationOptions(tools=[tool(t) for t in tools]))
    if warm is not None:
        warm.cancel()
    return warm is None


@pytest.mark.slow  # ~9-15 s: the default suite stays under its 10 minutes
async def test_the_session_prompt_is_read_before_the_first_call(models, gateway_config, tmp_path: Path) -> None:
    assert isinstance(models.llm, LlamaCppLanguageModel)
    session = tmp_path / "session.json"
    session.write_text(json.dumps({"type": "realtime", "instructions": INSTRUCTIONS, "tools": [PARCEL]}))
    async with serve(gateway_config(llm_warm_session=str(session)), models):
        assert held(models.llm, [PARCEL]), "the app's session prompt is read at start-up"
        assert not held(models.llm, [FERRY]), "a session with other tools is not"


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "No such file"),
        ("{not json", "Expecting property name"),
        (json.dumps({"tools": [{"type": "function", "name": "x", "parameters": 3}]}), "session.tools[0]"),
        (json.dumps([1, 2]), "llm_warm_session"),
    ],
)
def test_a_bad_session_file_stops_the_start(gateway_config, tmp_path: Path, content, says) -> None:
    path = tmp_path / "session.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match="llm_warm_session") as raised:
        create_app(gateway_config(llm_warm_session=str(path)))
    assert says in str(raised.value) and str(path) in str(raised.value)
