"""The aiohttp application factory: the app state (:mod:`gateway.server.app_keys`), middlewares,
routes, and the resources that live as long as the app, as ``app.cleanup_ctx`` pairs (models and
pool; the call registry).

The AppKeys are re-exported here (``from gateway.server.app import POOL``) for tests, scripts and
embedders; the server's own modules import them from ``app_keys``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.metrics import GatewayMetrics
from gateway.models.base import ModelSet
from gateway.models.compute.meter import metered_models
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.chain import StageFactory
from gateway.pool.pool import UnitPool
from gateway.pool.unit import PipelineUnit
from gateway.realtime.limits import SessionLimits
from gateway.server import routes
from gateway.server.admission import key_prefix
from gateway.server.app_keys import (
    CONFIG,
    KEYS,
    LIMITS,
    METRICS,
    MODELS,
    POOL,
    SESSIONS,
    SHUTDOWN,
    SIP_SETTINGS,
    local_model_names,
)
from gateway.server.auth import EphemeralKeys
from gateway.server.middleware import cors_middleware, error_middleware
from gateway.server.request_guard import request_guard
from gateway.server.shutdown import GracefulShutdown
from gateway.server.sip_routes import sip_user_agent
from gateway.server.startup_prompt import startup_prompt
from gateway.server.static_files import static_root
from gateway.transports.call_record import RecordPolicy, prepare_directory
from gateway.transports.door import Door
from gateway.transports.live_session import LiveSession
from gateway.transports.sip.settings import SipSettings
from gateway.transports.webrtc.ice import ice_configuration

__all__ = ["CONFIG", "KEYS", "LIMITS", "METRICS", "MODELS", "POOL", "SESSIONS", "SHUTDOWN", "create_app"]

# Room above the largest SDP offer for the rest of a request body (form parts, JSON, a session config).
_BODY_ALLOWANCE_BYTES = 64 * 1024


def create_app(
    config: GatewayConfig,
    models: Optional[ModelSet] = None,
    stage_factories: Optional[dict[str, StageFactory]] = None,
    startup: Optional[StartupSettings] = None,
) -> web.Application:
    """Build the app. ``models`` None: load them at start-up (once per process, in a thread).

    ``stage_factories`` replaces stage classes (test doubles for failure tests only). ``startup``:
    :func:`startup_settings` of ``config`` when the caller checked them already (read here when
    None). Raises ValueError for an unusable ``ice_servers``, ``llm_warm_session`` or SIP setting.
    """
    startup = startup or startup_settings(config)
    limits, prompt_to_read = startup.limits, startup.prompt
    app = web.Application(
        # CORS outermost: error answers get its headers too; the Origin/Host guard inside the error middleware.
        middlewares=[cors_middleware, error_middleware, request_guard],
        client_max_size=config.max_offer_bytes + _BODY_ALLOWANCE_BYTES,
    )
    app[CONFIG] = config
    app[LIMITS] = limits
    if startup.sip is not None:
        app[SIP_SETTINGS] = startup.sip
    app[METRICS] = GatewayMetrics()
    app[KEYS] = EphemeralKeys(prefix=key_prefix(config.instance))
    app[SHUTDOWN] = shutdown = GracefulShutdown(config.shutdown_grace_s, config.drain_timeout_s)
    shutdown.on_begin = lambda: app[METRICS].draining.set(1)
    app.cleanup_ctx.append(_models_and_pool(models, stage_factories, prompt_to_read))
    app.cleanup_ctx.append(_door)
    app.cleanup_ctx.append(sip_user_agent)  # after the door: SIP calls are its sessions
    routes.add_routes(app, static_root())
    return app


@dataclass(frozen=True)
class StartupSettings:
    """What the app reads once, at start-up, without loading a model: ``limits`` (the configured
    session limits), ``prompt`` (the warm session's settings; None without ``llm_warm_session``),
    ``sip`` (None without ``sip_port``; its TLS context loaded from the files)."""

    limits: SessionLimits
    prompt: Optional[CallSettings]
    sip: Optional[SipSettings]


def startup_settings(config: GatewayConfig) -> StartupSettings:
    """The settings the app reads once, checked without loading a model. ``voice-gateway serve``
    reads them before the minutes of model loading and hands them to :func:`create_app`. Raises
    ValueError naming ``ice_servers`` (a bad STUN/TURN setting fails here, not at the first call),
    ``llm_warm_session`` (a file that is missing or no session object) or a SIP setting (with
    ``sip_port``: ``SipSettings.from_config``, which reads the TLS certificate and key).
    The model settings are checked next, by ``load_models``, before anything loads."""
    ice_configuration(config)
    limits = SessionLimits.from_config(config)
    prompt = startup_prompt(config, limits)
    sip = SipSettings.from_config(config) if config.sip_port else None
    return StartupSettings(limits, prompt, sip)


CleanupContext = Callable[[web.Application], AsyncIterator[None]]


def _models_and_pool(
    models: Optional[ModelSet],
    stage_factories: Optional[dict[str, StageFactory]],
    prompt_to_read: Optional[CallSettings] = None,
) -> CleanupContext:
    """The cleanup context of the models (loaded now unless given; ``prompt_to_read``'s prompt
    read into the LLM before the port opens) and the unit pool (its units' stage threads stopped at
    clean-up). The pool's models are metered (compute seconds per stage), its units' frame hooks
    feed the frame counters, and the ``vg_pool_units`` gauge follows them."""

    async def models_and_pool(app: web.Application) -> AsyncIterator[None]:
        config = app[CONFIG]
        if models is None:
            from gateway.models.loader import load_models

            app[MODELS] = await asyncio.to_thread(load_models, config)
        else:
            app[MODELS] = models
        if prompt_to_read is not None:
            from gateway.models.warm_up import read_session_prompt

            read = prompt_to_read
            await asyncio.to_thread(
                read_session_prompt, app[MODELS].llm, read.instructions, list(read.tools), read.tool_choice
            )
        metrics = app[METRICS]
        metrics.watch_llm_queue(app[MODELS].llm)
        pool = UnitPool(metered_models(app[MODELS], metrics.model_compute), config, stage_factories=stage_factories)
        for unit in pool.units:
            unit.on_input_frame = metrics.inbound_frame
            unit.on_output_frame = metrics.outbound_frame
        metrics.watch_speculation(pool.units)
        metrics.watch_capacity(pool.capacity_now)

        def on_unit_change(unit: Optional[PipelineUnit]) -> None:
            for state, count in pool.snapshot()["totals"].items():
                metrics.units.labels(state=state).set(count)

        pool.on_state_change = on_unit_change
        pool.on_recovery = lambda unit: metrics.recoveries.inc()
        on_unit_change(None)
        app[POOL] = pool
        yield
        await asyncio.to_thread(pool.close)

    return models_and_pool


async def _door(app: web.Application) -> AsyncIterator[None]:
    """The cleanup context of the door, the live sessions of every transport (drained by
    ``app[SHUTDOWN]``, whose draining flag the door refuses new calls by): every session still
    live at clean-up is ended (``server_shutdown``, told to its client) before the pool closes.
    Its hooks feed the metrics, labelled by transport (``vg_calls_total{result}`` from its
    admission)."""
    config, metrics = app[CONFIG], app[METRICS]
    if config.record_dir:  # made, and its retention applied, before any call
        await asyncio.to_thread(prepare_directory, RecordPolicy.from_config(config), config.instance)
    shutdown = app[SHUTDOWN]
    door = Door(app[POOL], config, local_model_names(app), draining=lambda: shutdown.draining)
    await door.record_usage.measure()  # the disk bound's first measure, off the event loop

    def on_end(session: LiveSession) -> None:
        metrics.call_ended(session.kind.value, session.end_reason or "unknown")

    door.on_admission = lambda result: metrics.calls.labels(result=result).inc()
    door.on_event = metrics.observe_pipeline_event
    door.on_server_event = metrics.observe_server_event
    door.on_start = lambda session: metrics.call_started(session.kind.value)
    door.on_end = on_end
    shutdown.add_calls(lambda: list(door.sessions.values()))
    app[SESSIONS] = door
    yield
    await door.close_all()
