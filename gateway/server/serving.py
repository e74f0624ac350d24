"""Serving one gateway process until it is told to stop (``voice-gateway serve``).

The first SIGTERM or SIGINT starts the graceful drain (:mod:`gateway.server.shutdown`): admission
stops at once while the port stays open (new offers and WebSocket upgrades get ``503`` with
``Retry-After``, ``/healthz`` says ``draining``), each call finishes the answer it is hearing, at
most ``shutdown_grace_s``, every unit drains, and the process exits with status 0. A second signal
exits at once (status 128 + the signal number: 143 for SIGTERM, 130 for SIGINT), without draining.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from typing import Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.server.app_keys import CONFIG, POOL, SHUTDOWN
from gateway.server.connection_cap import CappedAppRunner

log = logging.getLogger(__name__)

# aiohttp waits this long for requests still in flight once the drain is over (there should be none).
_HTTP_SHUTDOWN_TIMEOUT_S = 5.0


class CannotServe(Exception):
    """The app could not start: ``str()`` says why, naming the setting or the address; ``status``
    is the exit status (2: a setting the start-up refused, 1: the address could not be listened on)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def bind_a_free_port(host: str) -> socket.socket:
    """A TCP socket bound to a port the kernel chooses on ``host`` (its first address; for ``""``
    the first wildcard, ``0.0.0.0`` or ``::``), not yet listening: connections are refused until
    :func:`serve_until_signalled` serves on it. ``serve --port 0`` binds it before anything else so
    that the instance name in call ids (``config.instance``: ``<host>-<port>``) is made from the
    port served, not from 0 (two such processes on one host would share ``<host>-0``). Raises
    :class:`CannotServe` (status 1) when ``host`` is not an address of this machine."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        bound = socket.socket(family, kind, proto)
        try:
            bound.bind(address)
        except OSError:
            bound.close()
            raise
    except OSError as exc:
        raise CannotServe(f"cannot listen on http://{host}:0 (--host, --port): {exc}", 1) from exc
    return bound


def check_can_listen(config: GatewayConfig, http: bool = True) -> None:
    """Before the models load (8-16 s, minutes on a cold cache): that ``serve`` can listen where it
    is told to, so that a mistyped ``--host`` or a port already taken is one line at once, not after
    the loading. Each address the HTTP host resolves to is bound on ``config.port`` (TCP) and let go,
    as aiohttp will bind it (SO_REUSEADDR, IPv6 sockets IPv6 only), and so are SIP's UDP and TCP
    ports (``sip_port``, on ``sip_host`` or the HTTP host) and its TLS port when TLS is set. Port 0
    is not checked, nor the HTTP port when not ``http`` (a socket :func:`bind_a_free_port` bound
    for it is served). Raises :class:`CannotServe` (status 1) naming the setting and the address."""
    sip_host = config.sip_host or config.host
    checks: list[tuple[str, int, int, str]] = []  # (host, port, socket type, what it is, for the message)
    if http:
        checks.append(
            (config.host, config.port, socket.SOCK_STREAM, f"http://{config.host}:{config.port} (--host, --port)")
        )
    if config.sip_port:
        checks.append(
            (sip_host, config.sip_port, socket.SOCK_DGRAM, f"SIP UDP {sip_host}:{config.sip_port} (--sip-port)")
        )
        checks.append(
            (sip_host, config.sip_port, socket.SOCK_STREAM, f"SIP TCP {sip_host}:{config.sip_port} (--sip-port)")
        )
        if config.sip_tls_cert:
            tls_port = config.sip_tls_port or config.sip_port + 1
            checks.append((sip_host, tls_port, socket.SOCK_STREAM, f"SIP TLS {sip_host}:{tls_port} (--sip-tls-port)"))
    for host, port, kind, what in checks:
        if not port:
            continue
        try:
            _bind_and_release(host, port, kind)
        except OSError as exc:
            raise CannotServe(f"cannot listen on {what}: {exc}", 1) from exc


def _bind_and_release(host: str, port: int, kind: int) -> None:
    """Bind every address ``host`` (``""``: every interface) resolves to on ``port``, one at a
    time, and close each. Raises OSError (gaierror for a name or address that does not resolve)."""
    for family, sock_type, proto, _, address in socket.getaddrinfo(
        host or None, port, type=kind, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, sock_type, proto) as probe:
            if kind == socket.SOCK_STREAM:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)


async def serve_until_signalled(
    app: web.Application, host: str, port: int, listener: Optional[socket.socket] = None
) -> int:
    """Start ``app`` on ``host:port`` (on ``listener`` when given: :func:`bind_a_free_port`), serve
    until SIGTERM/SIGINT, drain, clean up; returns 0.

    Start-up (``app.cleanup_ctx``: models, pool, SIP) runs before the port opens. Must run on the
    main thread's event loop (signal handlers). Prints (and logs) ``voice-gateway: serving on
    http://host:port`` once the port is open, with the port it listens on (the kernel's choice for
    ``port`` 0), and logs the drain's outcome. Raises :class:`CannotServe` (after
    cleaning up what had started) when a start-up setting is refused (ValueError, e.g.
    ``sip_rtp_latch``) or a port cannot be listened on (OSError: taken, an address not of this host).
    """
    runner = CappedAppRunner(
        app,
        handle_signals=False,
        shutdown_timeout=_HTTP_SHUTDOWN_TIMEOUT_S,
        keepalive_timeout=app[CONFIG].http_keepalive_timeout_s,  # aiohttp's own: an hour
    )
    try:
        try:
            await runner.setup()
        except ValueError as exc:
            raise CannotServe(f"bad setting: {exc}", 2) from exc
        except OSError as exc:  # the SIP port
            raise CannotServe(f"cannot listen: {exc}", 1) from exc
        site: web.BaseSite = web.TCPSite(runner, host, port) if listener is None else web.SockSite(runner, listener)
        try:
            await site.start()
        except OSError as exc:
            raise CannotServe(f"cannot listen on http://{host}:{port} (--host, --port): {exc}", 1) from exc
        config = app[CONFIG]
        bound = bound_port(runner, port)
        serving = f"serving on http://{host}:{bound} (pool of {config.pool_size}, instance {config.instance})"
        print(f"voice-gateway: {serving}", flush=True)
        log.info(serving)
        stop = asyncio.Event()
        _install_signal_handlers(app, stop)
        await stop.wait()
        shutdown = app[SHUTDOWN]
        log.info("shutting down: admitting no call, live calls have %.0f s to finish", shutdown.grace_s)
        report = await shutdown.drain(app[POOL].units)
        log.info(
            "drained in %.1f s: %d calls finished their answer, %d cut at the end of the grace period%s",
            report.seconds,
            report.finished,
            report.cut,
            f"; units not idle: {report.units_not_idle}" if report.units_not_idle else "",
        )
    finally:
        await runner.cleanup()
    return 0


def bound_port(runner: web.BaseRunner, asked: int) -> int:
    """The TCP port ``runner``'s site listens on: the one the kernel chose for ``asked`` 0
    (``--port 0``), else ``asked``."""
    for address in runner.addresses:  # getsockname() of each listening socket: (host, port, ...)
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return asked


def _install_signal_handlers(app: web.Application, stop: asyncio.Event) -> None:
    """SIGTERM/SIGINT: the first stops admitting (synchronously, in the handler) and sets ``stop``;
    the next one exits the process at once."""
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("second %s: exiting now, without draining", signal.Signals(signum).name)
            logging.shutdown()
            sys.stdout.flush()
            os._exit(128 + signum)
        app[SHUTDOWN].begin()
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
