"""Pipecat's ``OpenAIRealtimeLLMService`` (pipecat-ai 1.x, unchanged) in a minimal
pipeline, pointed at the gateway by its WebSocket URL: a typed turn, text out. pipecat runs in the
client venv (its pins conflict with the gateway's), as a subprocess (tests/clients/pipecat_turn.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clients.conftest import run_client
from tests.helpers import app_idle, serve, wait_until

SCRIPT = Path(__file__).with_name("pipecat_turn.py")
API_KEY = "sk-pipecat-test"


async def test_pipecat_realtime_service_completes_a_turn(models, gateway_config, client_python):
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=24), models) as (url, app):
        ws_url = url.replace("http://", "ws://") + "/v1/realtime"
        code, output = await run_client(client_python, SCRIPT, ws_url, API_KEY, within=150)
        lines = [line for line in output.splitlines() if line.startswith("{")]
        assert code == 0 and lines, output[-3000:]
        result = json.loads(lines[-1])
        assert result["text"].strip() and not result["errors"], result
        # pipecat ends its receive loop on most error events: the gateway sent none.
        assert "| ERROR" not in output, output[-3000:]
        assert await wait_until(lambda: app_idle(app), 10)
