"""The typed application keys (``aiohttp.web.AppKey``) of the gateway app: the state that the app
factory (:mod:`gateway.server.app`) sets up and the handlers and middlewares read.

``CONFIG``, ``LIMITS``, ``METRICS``, ``KEYS``, ``SHUTDOWN`` (and ``SIP_SETTINGS`` with ``sip_port``) are set
when the app is built;
``MODELS``, ``POOL`` and ``SESSIONS`` (the door: the live sessions of every transport) once start-up
(``app.cleanup_ctx``) has loaded the models and built the pool, so a handler that may run before
then checks ``KEY in request.app``.
"""

from __future__ import annotations

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.metrics import GatewayMetrics
from gateway.models.base import ModelSet
from gateway.pool.pool import UnitPool
from gateway.realtime.limits import SessionLimits
from gateway.server.auth import EphemeralKeys
from gateway.server.shutdown import GracefulShutdown
from gateway.transports.door import Door
from gateway.transports.sip.settings import SipSettings
from gateway.transports.sip.user_agent import SipUserAgent

CONFIG = web.AppKey("config", GatewayConfig)
LIMITS = web.AppKey("limits", SessionLimits)  # the configured session limits: the edge's and the sessions'
METRICS = web.AppKey("metrics", GatewayMetrics)
KEYS = web.AppKey("keys", EphemeralKeys)
SHUTDOWN = web.AppKey("shutdown", GracefulShutdown)  # the draining flag: admission refuses while it is set
MODELS = web.AppKey("models", ModelSet)
POOL = web.AppKey("pool", UnitPool)
SESSIONS = web.AppKey("sessions", Door)  # the live sessions of every transport (rtc_, ws_, sip_ ids)
SIP = web.AppKey("sip", SipUserAgent)  # the SIP user agent, only with sip_port set
SIP_SETTINGS = web.AppKey("sip_settings", SipSettings)  # read (TLS files too) once at start-up; with sip_port


def local_model_names(app: web.Application) -> dict[str, str]:
    """What ``session.created`` names as really used, whatever OpenAI names a client sends:
    ``{"llm", "stt", "voice"}`` from the config and the loaded TTS (after start-up)."""
    config = app[CONFIG]
    return {
        "llm": config.llm_model,
        "stt": config.stt_model,
        "voice": getattr(app[MODELS].tts, "voice", config.tts_voice),
    }
