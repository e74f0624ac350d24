"""The one error type of the HTTP API: raised by handlers, rendered as JSON by
:func:`gateway.server.middleware.error_middleware`.

The body is the OpenAI error shape, ``{"error": {"type", "code", "message", "param"}}`` (OpenAI
API reference, "Error codes"; the Realtime WebRTC contract answers a refused offer with it too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from gateway.realtime.items import ClientError

# The headers of an error that the same request cannot get past by being sent again. The OpenAI SDKs
# (openai-python ``_should_retry``, openai-node ``shouldRetry``) retry 408, 409, 429 and every 5xx
# twice unless the answer says ``x-should-retry: false`` (not a standard header: theirs).
NO_RETRY = {"x-should-retry": "false"}


class ApiError(Exception):
    """An HTTP error answer: ``status`` (4xx/5xx), a human ``message``, a machine ``code``
    (``invalid_offer``, ``pool_full``...), the OpenAI ``error_type`` (``invalid_request_error``,
    ``authentication_error``, ``server_busy``, ``rate_limit_error``, ``server_error``), the request
    field at fault (``param``, e.g. ``session.audio.output.speed``) and extra response ``headers``
    (``Retry-After``, ``Allow``)."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        error_type: str = "invalid_request_error",
        param: Optional[str] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.error_type = error_type
        self.param = param
        self.headers: dict[str, str] = dict(headers or {})

    @classmethod
    def from_protocol(cls, error: ClientError) -> ApiError:
        """A Realtime protocol error (a session config sent with an offer, a client_secrets
        request or a WebSocket URL: ``invalid_value``, ``string_above_max_length``...) as the 400
        answer to that request, with its ``code`` and ``param``. The one place the two meet: the
        error middleware calls it for every ClientError a handler raises."""
        return cls(400, str(error), error.code or "invalid_value", param=error.param)

    @property
    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"type", "code", "message", "param"}}``."""
        return {"error": {"type": self.error_type, "code": self.code, "message": self.message, "param": self.param}}
