"""Open HTTP connections per source: one peer address (an IPv6 /64) holds at most
``max_http_connections_per_source`` of them (32 by default, as SIP over TCP allows a source); the
next one is answered ``429 too_many_connections`` (the API's JSON error, ``Retry-After``) and
closed at once, before aiohttp reads a byte of it. A peer that is one of ``trusted_proxies`` (it
carries every client's connections: the loopback nginx of ``deploy/nginx.conf``) or of
``unlimited_sources`` is not counted (``gateway.transports.sources``).

The hook is the sites' protocol factory: :class:`CappedAppRunner` hands its sites (``TCPSite``
reads ``runner.server`` to make each connection's protocol) a factory whose protocol, a
:class:`_Gate`, decides at ``connection_made`` by the peer's address, then makes aiohttp's own
request handler and passes it every protocol call; the count drops at ``connection_lost``.
Nothing else of aiohttp changes (its shutdown and keep-alive timeout work on its handlers as before).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, Optional, cast

from aiohttp import web

from gateway.server.app_keys import CONFIG, METRICS
from gateway.server.errors import ApiError
from gateway.transports.sources import SourceLimits, in_networks, source_key

log = logging.getLogger(__name__)

TOO_MANY_CONNECTIONS = "too_many_connections"


class ConnectionCap:
    """The open connections of each counted source (``open``: key -> count) and the refusals made
    (``refused``); ``on_refused()`` is called at each (the metrics)."""

    def __init__(self, limits: SourceLimits, retry_after_s: int) -> None:
        self.limits = limits
        self.retry_after_s = retry_after_s
        self.open: dict[str, int] = {}
        self.refused = 0
        self.on_refused: Callable[[], None] = lambda: None

    def counted(self, peer: Optional[str]) -> bool:
        """Whether connections from ``peer`` count (a limit is set; no trusted proxy, no unlimited source)."""
        return (
            self.limits.max_http_connections > 0
            and peer is not None
            and self.limits.limited(peer)
            and not in_networks(peer, self.limits.trusted_proxies)
        )

    def take(self, key: str) -> bool:
        """Count a new connection of ``key``; False (nothing counted) when it holds the most already."""
        held = self.open.get(key, 0)
        if held >= self.limits.max_http_connections:
            self.refused += 1
            if self.refused % 1000 == 1:
                log.warning("HTTP connection from %s refused: it holds %d (max_http_connections_per_source)", key, held)
            self.on_refused()
            return False
        self.open[key] = held + 1
        return True

    def give_back(self, key: str) -> None:
        """A connection of ``key`` closed."""
        held = self.open.get(key, 0) - 1
        if held > 0:
            self.open[key] = held
        else:
            self.open.pop(key, None)

    def refusal(self, key: str) -> bytes:
        """The whole HTTP answer to a connection over the limit: 429, JSON, ``Connection: close``."""
        limit = self.limits.max_http_connections
        error = ApiError(
            429,
            f"Too many connections from one address: {key} holds {limit}, the most one source may hold "
            f"(max_http_connections_per_source {limit}); retry in {self.retry_after_s} s.",
            TOO_MANY_CONNECTIONS,
            "rate_limit_error",
        )
        body = json.dumps(error.body).encode()
        head = (
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: {self.retry_after_s}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body

    def factory(self, make_handler: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """The protocol factory of a site: each connection a :class:`_Gate` in front of ``make_handler()``."""
        return lambda: _Gate(self, make_handler)


class _Gate(asyncio.Protocol):
    """One connection: counted and handed to aiohttp's handler, or answered 429 and closed."""

    def __init__(self, cap: ConnectionCap, make_handler: Callable[[], asyncio.Protocol]) -> None:
        self._cap = cap
        self._make_handler = make_handler
        self._inner: Optional[asyncio.Protocol] = None
        self._key: Optional[str] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) and peername else None
        if self._cap.counted(peer):
            assert peer is not None
            key = source_key(peer)
            if not self._cap.take(key):
                cast(asyncio.Transport, transport).write(self._cap.refusal(key))
                transport.close()
                return
            self._key = key
        self._inner = self._make_handler()
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if self._key is not None:
            self._cap.give_back(self._key)
            self._key = None
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> Optional[bool]:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


class CappedAppRunner(web.AppRunner):
    """``web.AppRunner`` for the gateway app, whose sites' connections pass the app's
    :class:`ConnectionCap` (``cap``; refusals counted in ``vg_http_connections_refused_total``).
    Takes ``web.AppRunner``'s arguments. Raises ValueError for a bad network list."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        config = app[CONFIG]
        self.cap = ConnectionCap(SourceLimits.from_config(config), config.retry_after_s)
        self.cap.on_refused = app[METRICS].http_connections_refused.inc

    @property
    def server(self) -> Optional[web.Server]:
        """What a site makes each connection's protocol with: the cap's gate in front of aiohttp's
        server (None before ``setup``)."""
        handlers = super().server
        if handlers is None:
            return None
        return cast(web.Server, self.cap.factory(handlers))
