"""Operator routes: ``GET /healthz`` (load balancer), ``GET /metrics`` (Prometheus), ``GET /v1/pool``
(the units) and ``GET /v1/usage`` (totals since start).

They are open by default. With ``api_key`` set and ``protect_observability`` on, ``/metrics``,
``/v1/pool`` and ``/v1/usage`` need ``Authorization: Bearer <api_key>`` too (401
``invalid_api_key`` otherwise); ``/healthz`` stays open (it tells nothing about calls).
"""

from __future__ import annotations

from aiohttp import web

from gateway.logging_setup import redact_call_id
from gateway.server.app_keys import CONFIG, METRICS, MODELS, POOL, SHUTDOWN
from gateway.server.auth import bearer, require_api_key

__all__ = ["add_ops_routes", "redact_call_id"]


def require_operator(request: web.Request) -> None:
    """Raises ApiError 401 when ``protect_observability`` and ``api_key`` are set and the request
    does not carry the API key; nothing otherwise."""
    config = request.app[CONFIG]
    if config.protect_observability:
        require_api_key(config.api_key, bearer(request.headers.get("Authorization")))


async def pool_status(request: web.Request) -> web.Response:
    """``GET /v1/pool``: each unit's state and timings (:meth:`UnitPool.snapshot`).

    A call id is the capability to hang the call up (``DELETE /v1/realtime/calls/{call_id}``
    needs no other key when no API key is configured), so this view shows it shortened
    (:func:`redact_call_id`: the instance and the first 8 hex digits), enough to match the logs.
    Adds ``instance``, ``draining``, ``compute`` (the LLM's queue: ``running``, ``waiting``,
    ``slots``, ``saturated``; null without one) and ``capacity`` (admission by compute,
    :class:`gateway.pool.capacity.CapacityNow`: ``talkers`` live, the talking capacity ``limit`` and
    its ``source``, the decode ``step_ms`` by batch size, ``busy``).
    """
    require_operator(request)
    pool = request.app[POOL]
    snapshot = pool.snapshot()
    for unit in snapshot["units"]:
        if unit.get("call_id"):
            unit["call_id"] = redact_call_id(unit["call_id"])
    snapshot["instance"] = request.app[CONFIG].instance
    snapshot["draining"] = request.app[SHUTDOWN].draining
    capacity = pool.capacity_now()
    snapshot["compute"] = capacity.compute.as_json() if capacity.compute is not None else None
    snapshot["capacity"] = capacity.as_json()
    return web.json_response(snapshot)


async def usage(request: web.Request) -> web.Response:
    """``GET /v1/usage``: totals since the process started (:class:`gateway.metrics.Usage`):
    ``audio_in_s``, ``audio_out_s`` (reply audio sent), ``input_tokens``, ``output_tokens``,
    ``total_tokens``, ``responses`` by final status, ``calls``; plus ``instance``."""
    require_operator(request)
    body = request.app[METRICS].usage().as_json()
    body["instance"] = request.app[CONFIG].instance
    return web.json_response(body)


async def healthz(request: web.Request) -> web.Response:
    """``GET /healthz``: 200 ``{"status": "ok", "pool_size", "idle"}`` once the models are loaded
    and the pool exists; 503 ``{"status": "starting"}`` before, 503 ``{"status": "draining"}``
    once shutting down (a load balancer then stops sending new calls)."""
    if request.app[SHUTDOWN].draining:
        return web.json_response({"status": "draining"}, status=503)
    if POOL not in request.app or MODELS not in request.app:
        return web.json_response({"status": "starting"}, status=503)
    pool = request.app[POOL]
    return web.json_response({"status": "ok", "pool_size": len(pool.units), "idle": pool.snapshot()["totals"]["idle"]})


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: Prometheus text format 0.0.4 (see :mod:`gateway.metrics`)."""
    require_operator(request)
    body = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def add_ops_routes(app: web.Application) -> None:
    """Register ``/v1/pool``, ``/v1/usage``, ``/healthz`` and ``/metrics`` on ``app``."""
    app.router.add_get("/v1/pool", pool_status)
    app.router.add_get("/v1/usage", usage)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
