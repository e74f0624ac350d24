"""The aiohttp application: start-up (models, pool), shutdown, middlewares."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.metrics import GatewayMetrics
from gateway.models.base import ModelSet
from gateway.pipeline.events import TurnLatencyMeasured
from gateway.pool.pool import UnitPool
from gateway.pool.unit import StageFactory
from gateway.server import routes
from gateway.server.auth import EphemeralKeys
from gateway.signaling.call import CallRegistry, ice_configuration

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"

CONFIG = web.AppKey("config", GatewayConfig)
MODELS = web.AppKey("models", ModelSet)
POOL = web.AppKey("pool", UnitPool)
CALLS = web.AppKey("calls", CallRegistry)
METRICS = web.AppKey("metrics", GatewayMetrics)
KEYS = web.AppKey("keys", EphemeralKeys)


def create_app(
    config: GatewayConfig,
    models: Optional[ModelSet] = None,
    stage_factories: Optional[dict[str, StageFactory]] = None,
) -> web.Application:
    """Build the app. ``models`` None: load them at start-up (once per process).

    ``stage_factories`` replaces stage classes (test doubles for failure tests only). Raises
    ValueError for an unusable ``ice_servers`` setting.
    """
    ice_configuration(config)  # a bad STUN/TURN setting fails here, not at the first call
    app = web.Application(middlewares=[routes.cors_middleware], client_max_size=config.max_offer_bytes + 64 * 1024)
    app[CONFIG] = config
    app[METRICS] = GatewayMetrics()
    app[KEYS] = EphemeralKeys()

    async def startup(app: web.Application) -> None:
        if models is None:
            from gateway.models.loader import load_models

            app[MODELS] = await asyncio.to_thread(load_models, config)
        else:
            app[MODELS] = models
        metrics = app[METRICS]
        pool = UnitPool(app[MODELS], config, stage_factories=stage_factories)

        def on_unit_change(unit) -> None:
            for state, count in pool.snapshot()["totals"].items():
                metrics.units.labels(state=state).set(count)

        pool.on_state_change = on_unit_change
        on_unit_change(None)
        app[POOL] = pool
        local = {
            "llm": config.llm_model,
            "stt": config.stt_model,
            "voice": getattr(app[MODELS].tts, "voice", config.tts_voice),
        }
        calls = CallRegistry(pool, config, local)
        calls.on_event = lambda event: metrics.observe_latency(event.latency_ms) if isinstance(event, TurnLatencyMeasured) else None
        calls.on_call_end = lambda call: metrics.call_end.labels(reason=call.end_reason or "unknown").inc()
        app[CALLS] = calls

    async def cleanup(app: web.Application) -> None:
        if CALLS in app:
            await app[CALLS].close_all()
        if POOL in app:
            await asyncio.to_thread(app[POOL].close)

    app.on_startup.append(startup)
    app.on_cleanup.append(cleanup)
    routes.add_routes(app, STATIC_DIR)
    return app
