"""Bearer-key auth and the GA ``client_secrets`` flow (ephemeral ``ek_`` keys)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from gateway.realtime.session_update import SessionUpdate
from gateway.server.errors import ApiError

DEFAULT_TTL_S = 60
MIN_TTL_S = 10
MAX_TTL_S = 7200
# Unexpired keys held at once; each holds a session config of up to the request size limit, and
# without --api-key anyone may mint them.
MAX_KEYS = 1000


class KeyLimitError(RuntimeError):
    """``MAX_KEYS`` unexpired keys are held already (HTTP 429); ``retry_after_s`` is when the
    first of them expires."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many unexpired ephemeral keys; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass
class Grant:
    """What an ephemeral key was minted with: its expiry (Unix seconds) and the session config
    (``session`` of the client_secrets request, parsed at the edge) that the call it opens starts with."""

    expires_at: int
    session_config: Optional[SessionUpdate] = None


class EphemeralKeys:
    """Short-lived, single-use keys a backend mints for a browser (``POST /v1/realtime/client_secrets``).

    A key is valid until ``expires_at`` (Unix seconds) and is consumed by the first call it opens.
    Keys are ``prefix`` + random URL-safe text (``gateway.server.admission.key_prefix``: the
    process's instance, so a proxy routes a key to the one process holding it).
    ``clock`` returns Unix seconds (a test may replace it).
    """

    def __init__(self, clock: Callable[[], float] = time.time, max_keys: int = MAX_KEYS, prefix: str = "ek_") -> None:
        self.clock = clock
        self.prefix = prefix
        self.max_keys = max_keys
        self._keys: dict[str, Grant] = {}

    def mint(self, ttl_s: int = DEFAULT_TTL_S, session_config: Optional[SessionUpdate] = None) -> tuple[str, int]:
        """A new key valid for ``ttl_s`` seconds; returns (key, expires_at).

        Raises KeyLimitError when ``max_keys`` unexpired keys are held already."""
        self._expire()
        if len(self._keys) >= self.max_keys:
            first = min(grant.expires_at for grant in self._keys.values())
            raise KeyLimitError(max(1, int(first - self.clock()) + 1))
        key = self.prefix + secrets.token_urlsafe(24)
        expires_at = int(self.clock()) + ttl_s
        self._keys[key] = Grant(expires_at, session_config)
        return key, expires_at

    def consume(self, key: str) -> Optional[Grant]:
        """Take the key (it cannot be used again); None if unknown, used or expired."""
        self._expire()
        return self._keys.pop(key, None)

    def refund(self, key: str, grant: Grant) -> None:
        """Give back a key whose call could not be opened (pool full, bad offer): the browser may
        retry with it until it expires."""
        self._keys[key] = grant
        self._expire()

    def _expire(self) -> None:
        now = self.clock()
        for key in [k for k, grant in self._keys.items() if grant.expires_at <= now]:
            del self._keys[key]


def bearer(header: Optional[str]) -> Optional[str]:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def same_key(given: Optional[str], expected: str) -> bool:
    """Constant-time comparison of a presented key with the configured one. A key that is not
    UTF-8 (aiohttp hands a header's undecodable bytes over as lone surrogates) is not the key."""
    if given is None:
        return False
    try:
        presented = given.encode()
    except UnicodeEncodeError:
        return False
    return secrets.compare_digest(presented, expected.encode())


def require_api_key(api_key: Optional[str], token: Optional[str], what: str = "This route") -> None:
    """The operator's key check, the same on every route that needs it: nothing when no API key is
    configured (``api_key`` None or empty) or ``token`` (the bearer token presented) is that key;
    else ApiError 401 ``invalid_api_key`` saying ``what`` needs it. Ephemeral ``ek_`` keys open
    calls only (:func:`gateway.server.admission.admit`), never pass here."""
    if api_key and not same_key(token, api_key):
        raise ApiError(
            401,
            f"{what} needs the API key: send 'Authorization: Bearer <API key>'.",
            "invalid_api_key",
            "authentication_error",
        )
