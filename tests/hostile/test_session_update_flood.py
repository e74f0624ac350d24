"""``session.update`` floods with large tools. The engine's ``prepare`` (render and tokenize the
system prompt with every tool, then queue it on the shared decoder) ran on the event loop at each
update: with 128 tools of 32 KB, within the default limits, each update held the loop ~8 s
(``/healthz`` unanswered, every call's audio stalled), and updates at the allowed rate froze the
process for minutes. It now runs on a worker thread, one read at a time per call, the latest
settings only."""

from __future__ import annotations

import threading

from tests.helpers import serve, server_errors, wait_until
from tests.transports.websocket.ws_client import EventClient


async def test_instructions_and_tools_are_read_off_the_loop_and_only_the_latest(models, gateway_config, monkeypatch):
    loop_thread = threading.get_ident()
    calls: list[tuple[int, str]] = []
    prepare = models.llm.prepare

    def spy(messages, options=None):  # the real engine's prepare, noting where and for what it ran
        calls.append((threading.get_ident(), messages[0].content))
        return prepare(messages, options)

    monkeypatch.setattr(models.llm, "prepare", spy)
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": "Look the weather up. " * 1500, "parameters": {}}
        for i in range(8)
    ]  # 8 x 31.5 KB: over the default max_tools_bytes (64 KiB), as an operator who raised it allows
    async with serve(gateway_config(max_tools_bytes=1 << 20), models) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            await client.send("session.update", session={"tools": tools})
            mark = len(client.events)
            for n in range(50):
                await client.send("session.update", session={"instructions": f"Version {n}."})
            await client.wait_for("session.updated", after=mark, timeout=60, count=50)
            assert await wait_until(lambda: bool(calls) and calls[-1][1] == "Version 49.", 60), calls[-3:]
            assert all(thread != loop_thread for thread, _ in calls), "prepare ran on the event loop"
            assert len(calls) < 40, len(calls)  # the updates that came while a read ran: only the latest read
            assert not server_errors(client.events)
