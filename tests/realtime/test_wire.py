"""The one serializer of server events (``gateway.realtime.wire``): raw UTF-8, lone surrogates
written as U+FFFD, sizes in UTF-8 bytes. The transports' use of it: tests/transports/websocket/
test_wire_text.py and the max-message-size tests of tests/transports/webrtc/test_offers_and_calls.py."""

from __future__ import annotations

import json

from gateway.realtime.wire import encode_event, utf8_size


def test_non_ascii_is_written_as_itself_and_sized_in_utf8_bytes():
    event = {"type": "response.output_text.delta", "delta": "Köln 日本 😀"}
    text = encode_event(event)
    assert "Köln 日本 😀" in text and "\\u" not in text and json.loads(text) == event
    assert utf8_size(text) == len(text.encode("utf-8")) == len(text) + 1 + 2 * 2 + 3
    assert utf8_size(b"\xc3\xb6") == 2 and utf8_size("plain") == 5


def test_a_lone_surrogate_is_written_as_the_replacement_character():
    """Raw, it would not encode as UTF-8 (the transport's encoder raised); escaped JSON hid it."""
    text = encode_event({"text": "a\ud800b\udfff", "\udc00key": "😀"})
    assert json.loads(text) == {"text": "a\ufffdb\ufffd", "\ufffdkey": "😀"}
    text.encode("utf-8")  # does not raise
