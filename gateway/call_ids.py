"""The shape of a call id: ``<prefix>_<instance>_<32 hex digits>``.

The prefix names the transport (``rtc`` WebRTC, ``ws`` WebSocket, ``sip`` SIP), the instance the
process that owns the call (``config.instance``: 1-40 letters, digits or ``-``, what a proxy routes
by), and the 128 random bits make the id unguessable (it is a hang-up capability). The door mints
ids (``gateway.transports.door.new_session_id``); logging shortens them
(``gateway.logging_setup``) and the record directory knows its files by them
(``gateway.transports.call_record``). Standard library only, so any layer may import it.
"""

from __future__ import annotations

import re
from typing import Optional

# Transport (a TransportKind value) -> the prefix of its call ids.
ID_PREFIXES = {"webrtc": "rtc", "websocket": "ws", "sip": "sip"}
INSTANCE_PATTERN = r"[A-Za-z0-9-]{1,40}"
PREFIX_PATTERN = "(?:" + "|".join(ID_PREFIXES.values()) + ")"
# A whole call id (no groups; embed it in a larger pattern).
CALL_ID_PATTERN = rf"{PREFIX_PATTERN}_{INSTANCE_PATTERN}_[0-9a-f]{{32}}"
_CALL_ID_RE = re.compile(rf"({PREFIX_PATTERN})_({INSTANCE_PATTERN})_[0-9a-f]{{32}}")


def parse_call_id(text: str) -> Optional[tuple[str, str]]:
    """(transport, instance) of the call id ``text`` (``("sip", "gw-1")``); None when ``text`` is
    not a call id of this shape."""
    found = _CALL_ID_RE.fullmatch(text)
    if found is None:
        return None
    prefix, instance = found.groups()
    transport = next(name for name, known in ID_PREFIXES.items() if known == prefix)
    return transport, instance
