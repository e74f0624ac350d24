"""The ``realtime.call.incoming`` webhook of an incoming SIP call, signed as Standard Webhooks asks
(the scheme OpenAI's webhooks use).

Source: Standard Webhooks (standardwebhooks.com, spec v1): headers ``webhook-id`` (the message id,
here the event id), ``webhook-timestamp`` (Unix seconds) and ``webhook-signature: v1,<base64
HMAC-SHA256(key, "{id}.{timestamp}.{body}")>``, where the key is the base64 text after ``whsec_``
in the secret; OpenAI's ``realtime.call.incoming`` event body: ``{"object": "event", "id":
"evt_...", "type": "realtime.call.incoming", "created_at": <Unix s>, "data": {"call_id",
"sip_headers": [{"name", "value"}, ...]}}``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
import time
from typing import Any

import aiohttp

log = logging.getLogger(__name__)

SECRET_PREFIX = "whsec_"
# Seconds the backend has to take the webhook (its 2xx); the call itself waits for /accept.
DELIVERY_TIMEOUT_S = 10.0


def signing_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret. Raises ValueError for any other shape."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with 'whsec_' (then base64)")
    try:
        return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise ValueError("the webhook secret after 'whsec_' is not base64") from None


def sign(key: bytes, message_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` value: ``v1,`` + base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``."""
    digest = hmac.new(key, f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def incoming_call_event(call_id: str, sip_headers: list[dict[str, str]]) -> dict[str, Any]:
    """The ``realtime.call.incoming`` event for ``call_id`` with the INVITE's ``sip_headers``."""
    return {
        "object": "event",
        "id": "evt_" + secrets.token_hex(16),
        "type": "realtime.call.incoming",
        "created_at": int(time.time()),
        "data": {"call_id": call_id, "sip_headers": sip_headers},
    }


class WebhookSender:
    """POSTs events to ``url``, signed with ``secret`` (empty: unsigned). ``sent`` counts the
    deliveries the backend took (2xx)."""

    def __init__(self, url: str, secret: str) -> None:
        self.url = url
        self._key = signing_key(secret) if secret else None
        self._session: aiohttp.ClientSession | None = None
        self.sent = 0

    async def deliver(self, event: dict[str, Any]) -> bool:
        """POST ``event``; True when the backend answered 2xx (False: refused, unreachable, slow)."""
        body = json.dumps(event, separators=(",", ":"))
        timestamp = int(time.time())
        headers = {"content-type": "application/json", "webhook-id": event["id"], "webhook-timestamp": str(timestamp)}
        if self._key is not None:
            headers["webhook-signature"] = sign(self._key, event["id"], timestamp, body)
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DELIVERY_TIMEOUT_S))
        try:
            async with self._session.post(self.url, data=body.encode(), headers=headers) as response:
                ok = 200 <= response.status < 300
                if not ok:
                    log.warning("webhook %s answered %d", self.url, response.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("webhook %s not delivered: %s", self.url, exc)
            return False
        self.sent += ok
        return ok

    async def close(self) -> None:
        """Close the HTTP client."""
        if self._session is not None:
            await self._session.close()
            self._session = None
