"""Bearer-key auth and the GA ``client_secrets`` flow (ephemeral ``ek_`` keys)."""

from __future__ import annotations

import secrets
import time
from typing import Optional


class EphemeralKeys:
    """Short-lived, single-use keys a backend mints for a browser (``POST /v1/realtime/client_secrets``).

    A key is valid until ``expires_at`` (Unix seconds) and is consumed by the first call it opens.
    """

    def __init__(self) -> None:
        self._keys: dict[str, float] = {}

    def mint(self, ttl_s: int) -> tuple[str, int]:
        self._expire()
        key = "ek_" + secrets.token_urlsafe(24)
        expires_at = int(time.time()) + ttl_s
        self._keys[key] = expires_at
        return key, expires_at

    def consume(self, key: str) -> bool:
        self._expire()
        return self._keys.pop(key, None) is not None

    def _expire(self) -> None:
        now = time.time()
        for key in [k for k, exp in self._keys.items() if exp <= now]:
            del self._keys[key]


def bearer(header: Optional[str]) -> Optional[str]:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None
