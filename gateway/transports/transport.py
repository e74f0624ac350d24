"""What a transport is, for a newcomer adding one: its :class:`TransportKind` (one line) and the
:class:`Transport` protocol its leg implements. The door (``gateway.transports.door``) opens the
session, ``gateway.transports.live_session`` runs it; see CONTRIBUTING.md, "Where a transport goes".
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Coroutine
from typing import Any, Optional, Protocol

from gateway.call_ids import ID_PREFIXES
from gateway.pool.end_reason import EndReason
from gateway.realtime.audio_events import AudioInput

ServerEvent = dict[str, Any]


class TransportKind(enum.StrEnum):
    """A transport; the value labels the metrics (``vg_active_sessions{transport=...}``) and keys
    its call-id prefix in ``gateway.call_ids.ID_PREFIXES``."""

    WEBRTC = "webrtc"
    WEBSOCKET = "websocket"
    SIP = "sip"

    @property
    def id_prefix(self) -> str:
        """The prefix of its session ids (``rtc``, ``ws``, ``sip``; ``gateway.call_ids``)."""
        return ID_PREFIXES[self.value]


class Transport(Protocol):
    """What the door asks of one caller's leg (WebRTC call, WebSocket, SIP leg). All on the event
    loop; none of it may block."""

    @property
    def audio_input(self) -> Optional[AudioInput]:
        """Where the caller audio of ``input_audio_buffer.append`` goes, for a transport that
        carries audio in its events (WebSocket); None when it comes as media (an RTP track: the
        transport submits it to ``session.lease.submit_audio`` itself)."""

    def send_event(self, event: ServerEvent) -> None:
        """Send a Realtime server event to the client; dropped when the leg cannot carry it (not
        open yet, or closed)."""

    def when_audio_sent(self, generation: int, then: Callable[[], None]) -> None:
        """Call ``then()`` once the reply audio of ``generation`` has left (a spoken response's
        ``response.done`` waits for it). A transport whose audio plays out in real time calls it at once."""

    def stop_audio(self) -> None:
        """Stop reading reply audio from the unit (called before the unit is released: the next
        caller's audio must never reach this leg)."""

    def close(self, reason: EndReason, message: Optional[str]) -> Coroutine[Any, Any, None]:
        """Close the leg (after the unit was released), the client told why when it is still there
        (``reason.client_left`` False). Must not raise for a leg that is gone already."""
