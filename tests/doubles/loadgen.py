"""The load generator's doubles: a gateway's ``GET /v1/pool`` whose admission is busy for a while,
and a gateway whose units drain after the calls end, counting on as they do."""

from __future__ import annotations

from typing import Any, Optional


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


class DrainingGatewayDouble:
    """``GET /v1/pool`` and ``GET /metrics`` of a gateway whose calls' units are still draining when
    the callers are done: after the first ``/metrics`` read (a phase's "before"), ``/v1/pool`` says
    one unit is in use for ``drain_polls`` answers; when it first says none is, the discard of a
    preemptive reply has landed (``vg_preemptive_replies_total{outcome="discarded"}`` goes 0 -> 1).
    ``key``: both routes want ``Authorization: Bearer <key>`` (401 without it), as a keyed gateway's.
    :meth:`app` is the aiohttp application; ``pool_polls`` counts the ``/v1/pool`` answers."""

    def __init__(self, drain_polls: int, key: Optional[str] = None) -> None:
        self.drain_polls = drain_polls
        self.key = key
        self.pool_polls = 0
        self.draining: Optional[int] = None  # polls left while draining (None: before the phase)
        self.discarded = 0

    def app(self) -> Any:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/v1/pool", self._pool)
        app.router.add_get("/metrics", self._metrics)
        return app

    def _refused(self, request: Any) -> bool:
        return self.key is not None and request.headers.get("Authorization") != f"Bearer {self.key}"

    async def _pool(self, request: Any) -> Any:
        from aiohttp import web

        if self._refused(request):
            return web.json_response({"error": {"code": "invalid_api_key"}}, status=401)
        self.pool_polls += 1
        in_use = 0
        if self.draining is not None:
            if self.draining > 0:
                self.draining -= 1
                in_use = 1
            else:
                self.discarded = 1
        return web.json_response({"in_use": in_use, "capacity": {"busy": False, "reason": None}})

    async def _metrics(self, request: Any) -> Any:
        from aiohttp import web

        if self._refused(request):
            return web.Response(status=401)
        if self.draining is None:
            self.draining = self.drain_polls
        text = (
            "# HELP vg_preemptive_replies_total Replies started at a pause, by outcome\n"
            "# TYPE vg_preemptive_replies_total counter\n"
            f'vg_preemptive_replies_total{{outcome="discarded"}} {float(self.discarded)}\n'
        )
        return web.Response(text=text, content_type="text/plain")
