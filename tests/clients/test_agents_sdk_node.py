"""The OpenAI Agents SDK for JavaScript (``@openai/agents-realtime``, its
``OpenAIRealtimeWebSocket`` transport), unchanged, in Node, pointed at the gateway by URL: a spoken
turn, ``interrupt()`` of a reply while it plays, and a turn after it (tests/clients/agents_sdk_turn.mjs).
The SDK is npm's, installed by scripts/build_agents_sdk_bundle.sh (``setup.sh --browser``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clients.conftest import run_client
from tests.helpers import app_idle, serve, wait_until

SCRIPT = Path(__file__).with_name("agents_sdk_turn.mjs")
API_KEY = "sk-agents-js-test"


@pytest.mark.slow
async def test_agents_sdk_js_websocket_turn_and_interrupt(models, gateway_config, agents_sdk_node):
    node, modules = agents_sdk_node
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=40), models) as (url, app):
        ws_url = url.replace("http://", "ws://") + "/v1/realtime?model=gpt-realtime"
        code, output = await run_client(
            node, SCRIPT, ws_url, API_KEY, within=200, env={"AGENTS_SDK_MODULES": str(modules)}
        )
        lines = [line for line in output.splitlines() if line.startswith("{")]
        assert lines, output[-3000:]
        result = json.loads(lines[-1])
        assert code == 0 and not result.get("failure") and not result["errors"], result
        assert result["firstAudioBytes"] >= 24000  # half a second of 24 kHz 16-bit audio, at least
        assert "paris" in result["firstTranscript"].lower(), result
        assert result["interrupted"]
        assert not [t for t in result["seen"] if t.startswith("output_audio_buffer.")]  # WebRTC only
        assert await wait_until(lambda: app_idle(app), 10)
