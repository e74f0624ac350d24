"""Server events out of one Realtime session: its dialect (GA or beta names) and its end."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from gateway.realtime.events import GA_ONLY, GA_TO_BETA, GATEWAY_EVENTS, error_event, public_item, server_event


class EventSender:
    """Sends server events by their GA names through ``send_raw`` (which must not block; it is
    called on the event loop). A beta session (``beta`` True, set by a flat ``session.update``) gets
    the beta names, and no GA-only events. The gateway's own events (``GATEWAY_EVENTS``) go out
    only when named in ``extensions`` (the client asked for them: a stock client validates every
    event against OpenAI's types and fails on others). Once ``closed`` nothing more is sent.
    """

    def __init__(self, send_raw: Callable[[dict], None], extensions: frozenset[str] = frozenset()) -> None:
        self._send_raw = send_raw
        self.extensions = extensions
        self.beta = False
        self.closed = False

    def send(self, event_type: str, **fields: Any) -> None:
        """Send a server event (a fresh ``event_id`` is added) by its GA name."""
        if self.closed or (event_type in GATEWAY_EVENTS and event_type not in self.extensions):
            return
        if self.beta:
            if event_type in GA_ONLY:
                return
            event_type = GA_TO_BETA.get(event_type, event_type)
        self._send_raw(server_event(event_type, **fields))

    def error(
        self,
        message: str,
        code: Optional[str] = None,
        param: Optional[str] = None,
        event_id: Optional[str] = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        """Send an ``error``; ``event_id`` is the client event that caused it, if any."""
        if not self.closed:
            self._send_raw(error_event(message, code=code, param=param, event_id=event_id, error_type=error_type))

    def view(self, item: dict) -> dict:
        """A conversation item as this session's client sees it (see ``public_item``)."""
        return public_item(item, beta=self.beta)
