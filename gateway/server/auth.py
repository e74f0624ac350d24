"""Bearer-key auth and the GA ``client_secrets`` flow (ephemeral ``ek_`` keys)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Callable, Optional

DEFAULT_TTL_S = 60
MIN_TTL_S = 10
MAX_TTL_S = 7200


@dataclass
class Grant:
    """What an ephemeral key was minted with: its expiry (Unix seconds) and the session config
    (``session`` of the client_secrets request) that the call it opens starts with."""

    expires_at: int
    session: Optional[dict] = None


class EphemeralKeys:
    """Short-lived, single-use keys a backend mints for a browser (``POST /v1/realtime/client_secrets``).

    A key is valid until ``expires_at`` (Unix seconds) and is consumed by the first call it opens.
    ``clock`` returns Unix seconds (a test may replace it).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._keys: dict[str, Grant] = {}

    def mint(self, ttl_s: int = DEFAULT_TTL_S, session: Optional[dict] = None) -> tuple[str, int]:
        """A new key valid for ``ttl_s`` seconds; returns (key, expires_at)."""
        self._expire()
        key = "ek_" + secrets.token_urlsafe(24)
        expires_at = int(self.clock()) + ttl_s
        self._keys[key] = Grant(expires_at, session)
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
    """Constant-time comparison of a presented key with the configured one."""
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())
