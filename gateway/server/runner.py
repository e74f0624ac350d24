"""Run a gateway app inside an existing event loop (tests, benchmarks, embedding)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.models.base import ModelSet
from gateway.pipeline.chain import StageFactory
from gateway.server.app import create_app
from gateway.server.connection_cap import CappedAppRunner


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.asynccontextmanager
async def running_gateway(
    config: GatewayConfig,
    models: Optional[ModelSet] = None,
    stage_factories: Optional[dict[str, StageFactory]] = None,
) -> AsyncIterator[tuple[str, web.Application]]:
    """Serve the gateway on ``config.host:config.port`` until the block ends; yields (base_url, app).

    ``models`` and ``stage_factories`` as for :func:`gateway.server.app.create_app`."""
    app = create_app(config, models=models, stage_factories=stage_factories)
    runner = CappedAppRunner(app, keepalive_timeout=config.http_keepalive_timeout_s)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    await site.start()
    try:
        yield f"http://{config.host}:{config.port}", app
    finally:
        await runner.cleanup()
