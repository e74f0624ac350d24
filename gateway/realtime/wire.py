"""Realtime events as text on the wire: the one serializer of server events (every transport sends
what :func:`encode_event` makes), their size in bytes, and the repair of lone UTF-16 surrogates.

Reference: the OpenAI Realtime API sends every event as one JSON text message (a WebSocket text
frame, RFC 6455 5.6; a WebRTC data channel string message, RFC 8831 6.6): UTF-8 text (RFC 8259 8.1).

Non-ASCII characters go out as themselves, UTF-8 encoded, not as ``\\uXXXX`` escapes
(``json.dumps``'s default): an emoji is 4 bytes, not 12 (``"\\ud83d\\ude00"``), and a reply in
Japanese half the size. A WebRTC peer takes messages up to its SDP's ``a=max-message-size``
(Chrome 256 KiB): escaped, a 128 KiB client message echoed back could be 384 KB and never arrive.

A Python ``str`` can hold a lone surrogate (U+D800..U+DFFF: JSON can spell one, ``"\\ud800"``,
and ``json.loads`` keeps it), which no UTF-8 encoder takes: sent as it is, the transport's
encoder raises (aiohttp's writer task died with every later event of the session; aiortc dropped
the event). Escaped JSON hid that; raw UTF-8 cannot. So each lone surrogate is written as U+FFFD
(the replacement character), as client events are repaired at the door
(``gateway.realtime.client_messages``): the event is sent, the rest of it intact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# A UTF-16 surrogate code point in a str (a pair decoded from JSON is one character already).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT_CHARACTER = "\ufffd"


def replace_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``text`` itself when it has none)."""
    if text.isascii() or LONE_SURROGATE.search(text) is None:
        return text
    return LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, text)


def encode_event(event: Mapping[str, Any]) -> str:
    """A server event as the JSON text of one message: non-ASCII as itself (its UTF-8 size is
    :func:`utf8_size`), lone surrogates as U+FFFD, so that it always encodes as UTF-8."""
    return replace_lone_surrogates(json.dumps(event, ensure_ascii=False))


def utf8_size(message: str | bytes) -> int:
    """The size of a message in bytes of UTF-8 (what a transport sends), without copying it when
    it is ASCII (as JSON with base64 audio is): ``str.isascii`` is a flag of the string, not a
    scan. A lone surrogate counts the 3 bytes its ``surrogatepass`` encoding takes."""
    if isinstance(message, bytes) or message.isascii():
        return len(message)
    return len(message.encode("utf-8", "surrogatepass"))
