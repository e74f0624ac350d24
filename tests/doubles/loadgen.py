"""The load generator's double: a gateway's ``GET /v1/pool`` whose admission is busy for a while."""

from __future__ import annotations

from typing import Any


class SettlingPoolDouble:
    """The ``GET /v1/pool`` of a gateway whose admission is busy for its first ``busy_polls``
    answers (the load of an earlier phase still in its window), then admits: :meth:`handle` is
    the aiohttp handler; it counts the ``polls``."""

    def __init__(self, busy_polls: int) -> None:
        self.busy_polls = busy_polls
        self.polls = 0

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        self.polls += 1
        busy = self.polls <= self.busy_polls
        return web.json_response({"capacity": {"busy": busy, "reason": "answers start late" if busy else None}})
