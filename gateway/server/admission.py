"""Opening a call for an HTTP request: who may (the API key, or a single-use ephemeral ``ek_`` key
of the GA ``client_secrets`` flow), reading the offer, and the call itself. Whether the gateway
has room (draining, pool, compute) and the counts of calls are the door's
(``gateway.transports.door``): its :class:`~gateway.transports.door.Refused` is answered here as
``503`` with ``Retry-After`` (:func:`refused_error`); :func:`admit` makes the door's checks around
the key check (draining before it, the busy check after it).

An ephemeral key is taken when the request comes in and given back whenever no call comes of it
(refused offer, pool full, compute busy, a server fault, the client gone), so a browser may retry with it until
it expires. Sources: the OpenAI Realtime WebRTC contract (``POST /v1/realtime/calls`` with
``Authorization: Bearer``; ephemeral keys from ``POST /v1/realtime/client_secrets``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Optional

from aiohttp import web

from gateway.realtime.session_update import SessionUpdate, merged_updates
from gateway.server.app_keys import CONFIG, KEYS, SESSIONS
from gateway.server.auth import Grant, bearer, same_key
from gateway.server.errors import ApiError
from gateway.server.offers import Offer, requested_extensions
from gateway.transports.door import TOO_MANY_SESSIONS, Refused
from gateway.transports.live_session import LiveSession
from gateway.transports.webrtc.call import open_call as open_webrtc_call
from gateway.transports.webrtc.offer import OfferError

OfferReader = Callable[[web.Request], Awaitable[Offer]]


def key_prefix(instance: str) -> str:
    """The start of this process's ephemeral keys: ``ek_<instance>_`` (then random URL-safe text).

    Keys live in the memory of the process that minted them; behind several processes the
    instance in the key lets a proxy route the call to that process, as it routes a call id
    ``rtc_<instance>_<hex>`` (``deploy/nginx.conf`` reads it from ``Authorization: Bearer`` and the
    ``openai-insecure-api-key.`` WebSocket subprotocol)."""
    return f"ek_{instance}_"


@dataclass
class Admission:
    """A request allowed to open a call, and the ephemeral key it used (None for the API key or
    an open gateway), refunded if no call comes of it."""

    key: Optional[str] = None
    grant: Optional[Grant] = None
    source: Optional[str] = None  # the client's address (client_source), for the door's per-source limit

    def refund(self, request: web.Request) -> None:
        """Give the ephemeral key back (its call was not opened); nothing for an API key."""
        if self.key is not None and self.grant is not None:
            request.app[KEYS].refund(self.key, self.grant)

    @property
    def update(self) -> Optional[SessionUpdate]:
        """The session config the ephemeral key was minted with (parsed then), if any."""
        return self.grant.session_config if self.grant is not None else None


def client_source(request: web.Request) -> Optional[str]:
    """The request's source, for the per-source limits: the peer's address, or the client named in
    ``X-Forwarded-For`` by a ``trusted_proxies`` peer (``gateway.transports.sources``)."""
    limits = request.app[SESSIONS].source_limits
    return limits.client(request.remote, request.headers.getall("X-Forwarded-For", []))


def admit(request: web.Request, token: Optional[str] = None) -> Admission:
    """Who may open a call: anyone when no API key is configured, else a bearer of the API key or
    of an unused, unexpired ephemeral key (taken now: single use); ``token`` None: the one of the
    ``Authorization: Bearer`` header (a WebSocket passes the one it found). An ephemeral key is honoured
    (its session config applies) even when no API key is configured. Raises ApiError: 503
    ``server_shutdown`` once the gateway is draining (the door's ``refuse_if_draining``, checked
    first: no key is used up), then 401 ``invalid_api_key``, then 429 ``too_many_sessions`` when
    the client's source (:func:`client_source`) holds ``max_sessions_per_source`` live sessions,
    then 503 ``pool_full`` or
    ``compute_busy`` when this process has no unit or cannot answer one more talking caller (the
    door's ``refuse_if_busy``, before the offer is read; after the key, so a caller without one
    learns nothing of the load and is not counted, and the key is given back)."""
    door = request.app[SESSIONS]
    try:
        door.refuse_if_draining()
    except Refused as refused:
        raise refused_error(refused) from None
    admission = _authenticate(request, token)
    admission.source = client_source(request)
    try:
        door.refuse_if_source_full(admission.source)
        door.refuse_if_busy()
    except Refused as refused:
        admission.refund(request)
        raise refused_error(refused) from None
    return admission


def _authenticate(request: web.Request, token: Optional[str]) -> Admission:
    """The key check of :func:`admit`. Raises ApiError 401 ``invalid_api_key``."""
    config = request.app[CONFIG]
    if token is None:
        token = bearer(request.headers.get("Authorization"))
    if config.api_key and same_key(token, config.api_key):
        return Admission()
    grant = request.app[KEYS].consume(token) if token and token.startswith("ek_") else None
    if grant is not None:
        return Admission(token, grant)
    if not config.api_key:
        return Admission()
    reason = "Missing API key" if token is None else "Invalid, used or expired API key"
    raise ApiError(
        401,
        f"{reason}: send 'Authorization: Bearer <API key or ephemeral key>'.",
        "invalid_api_key",
        "authentication_error",
    )


async def open_call(request: web.Request, read_offer: OfferReader) -> tuple[LiveSession, str]:
    """Check the caller, read the offer with ``read_offer(request)``, open the call: the ephemeral
    key's session config first, the offer's on top. Returns (call, SDP answer).

    Raises ApiError: 401 (see :func:`admit`), 400 (the body; a session config that is invalid, also
    once merged; an unusable offer: code ``invalid_offer``), 503 ``server_shutdown``, ``pool_full``
    or ``compute_busy``, 429 ``too_many_sessions``, with ``Retry-After`` (:func:`refused_error`).
    The ephemeral key is given
    back whenever no call came of it.
    """
    admission = admit(request)
    try:
        extensions = requested_extensions(request)
        offer = await read_offer(request)
        update = merged_updates(admission.update, offer.update)  # each one was valid: together too?
        call, answer = await open_webrtc_call(
            request.app[SESSIONS], offer.sdp, update, extensions=extensions, source=admission.source
        )
    except Refused as refused:
        admission.refund(request)
        raise refused_error(refused) from None
    except OfferError as exc:
        admission.refund(request)
        raise ApiError(400, str(exc), "invalid_offer") from None
    except BaseException:  # refused, the body never came in full, a server fault: no call, so no key used up
        admission.refund(request)
        raise
    return call, answer


def refused_error(refused: Refused) -> ApiError:
    """The answer to a call the door refused, with its code and ``Retry-After``: draining, no
    unit, no compute: 503 (``server_shutdown``, ``pool_full``, ``compute_busy``; type
    ``server_busy``); the source's limit: 429 ``too_many_sessions`` (type ``rate_limit_error``)."""
    headers = {"Retry-After": str(refused.retry_after_s)}
    if refused.code == TOO_MANY_SESSIONS:
        return ApiError(429, refused.message, refused.code, "rate_limit_error", headers=headers)
    return ApiError(503, refused.message, refused.code, "server_busy", headers=headers)
