"""aiortc's SCTP data channels, made safe against text messages that are not UTF-8.

A data channel message marked as text (SCTP payload protocol identifier 51, "WebRTC String",
RFC 8831 8) must be UTF-8. aiortc decodes it with ``bytes.decode("utf8")`` inside its DTLS receive
loop, so one invalid message raises there and closes the DTLS transport: the caller's audio and
channel die with it (and a traceback is logged). Here such a message is handed to the channel as
bytes instead, which :func:`gateway.realtime.client_messages.decode_client_message` refuses with
an ``error`` event (``invalid_json``: "Messages must be UTF-8 JSON text."), and the call goes on.

The point of entry is ``RTCSctpTransport._data_channel_receive`` (private: aiortc has no hook).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiortc import RTCSctpTransport

log = logging.getLogger(__name__)

WEBRTC_STRING = 51  # RFC 8831 8: a UTF-8 text message


def accept_invalid_text(sctp: RTCSctpTransport) -> bool:
    """Make ``sctp`` deliver a text message that is not UTF-8 as bytes rather than fail on it.
    Returns False (logged once) when aiortc's receive path is not where it was."""
    deliver: Callable[[int, int, bytes], Awaitable[None]] | None = getattr(sctp, "_data_channel_receive", None)
    channels: Any = getattr(sctp, "_data_channels", None)
    if deliver is None or not isinstance(channels, dict):
        log.warning("aiortc's SCTP transport has no data channel receive path to guard")
        return False

    async def data_channel_receive(stream_id: int, pp_id: int, data: bytes) -> None:
        if pp_id == WEBRTC_STRING:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                channel = channels.get(stream_id)
                if channel is not None:
                    channel.emit("message", bytes(data))
                return
        await deliver(stream_id, pp_id, data)

    sctp._data_channel_receive = data_channel_receive  # type: ignore[method-assign]
    return True
