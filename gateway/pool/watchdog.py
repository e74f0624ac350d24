"""The session watchdogs every transport shares (run by each live session,
``gateway.transports.live_session``): the idle timeout (``idle_timeout_s``: no speech and no
response) and the longest session (``max_call_s``), read off the call's lease.

The WebRTC call waits for ICE/DTLS first (``connect_timeout_s``) and watches its media itself
(``media_timeout_s``); neither applies to a WebSocket.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from gateway.config import GatewayConfig
from gateway.pool.end_reason import EndReason
from gateway.pool.lease import UnitLease

Hangup = Callable[[EndReason, str], Awaitable[None]]


def watch_interval_s(config: GatewayConfig) -> float:
    """How often the watchdog looks: a tenth of the shorter limit, within 50..500 ms."""
    return min(0.5, max(0.05, min(config.idle_timeout_s, config.max_call_s) / 10))


async def watch_session(
    lease: UnitLease, config: GatewayConfig, *, started_at: float, ended: Callable[[], bool], hangup: Hangup
) -> None:
    """Until ``ended()``: end the session with ``hangup(reason, message)`` once it has lasted
    ``max_call_s`` since ``started_at`` (``time.monotonic()`` seconds; MAX_DURATION), or once
    ``idle_timeout_s`` passed since the call's last activity (IDLE_TIMEOUT). A response being
    generated or played counts as activity. (Realtime's ``idle_timeout_ms`` prompts the caller
    instead: ``gateway.realtime.idle_timer``.) Returns after a hang-up; cancel it otherwise."""
    tick = watch_interval_s(config)
    while not ended():
        await asyncio.sleep(tick)
        now = time.monotonic()
        if now - started_at >= config.max_call_s:
            await hangup(EndReason.MAX_DURATION, f"maximum call duration of {config.max_call_s:g} s reached")
            return
        if lease.busy():
            lease.touch()
        elif lease.idle_for_s() >= config.idle_timeout_s:
            await hangup(EndReason.IDLE_TIMEOUT, f"no speech and no response for {config.idle_timeout_s:g} s")
            return
