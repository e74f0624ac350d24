"""Run a gateway app inside an existing event loop (tests, benchmarks, embedding)."""

from __future__ import annotations

import contextlib
import socket
from typing import AsyncIterator, Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.models.base import ModelSet


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@contextlib.asynccontextmanager
async def running_gateway(config: GatewayConfig, models: Optional[ModelSet] = None,
                          **app_options) -> AsyncIterator[tuple[str, web.Application]]:
    """Serve the gateway on ``config.host:config.port`` until the block ends; yields (base_url, app)."""
    from gateway.server.app import create_app

    app = create_app(config, models=models, **app_options)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port)
    await site.start()
    try:
        yield f"http://{config.host}:{config.port}", app
    finally:
        await runner.cleanup()
