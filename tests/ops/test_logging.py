"""Structured logs: JSON lines, the call id on every line logged for a call (task or stage thread),
and no full call id, ephemeral key, bearer token or configured secret in any line."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import threading

import pytest

from gateway.call_ids import parse_call_id
from gateway.config import GatewayConfig
from gateway.logging_setup import CALL_ID, bind_call, configure_logging, redact_call_id, redact_text
from gateway.transports.door import new_session_id
from gateway.transports.transport import TransportKind

CALL = "rtc_gw-1_0123456789abcdef0123456789abcdef"


@pytest.fixture
def captured():
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_call_ids_carry_the_instance_and_stay_unguessable():
    call_id = new_session_id(TransportKind.WEBRTC, GatewayConfig(instance_id="gw-1").instance)
    prefix, instance, digits = call_id.split("_")
    assert (prefix, instance, len(digits)) == ("rtc", "gw-1", 32)
    assert re.fullmatch(r"[0-9a-f]{32}", digits), digits  # 128 random bits, as lower-case hex
    # Random: 200 ids share no 64-bit prefix (a counter or a clock would), and every hex digit occurs.
    many = [new_session_id(TransportKind.WEBRTC, "gw-1").split("_")[2] for _ in range(200)]
    assert len({d[:16] for d in many}) == 200 and set("".join(many)) == set("0123456789abcdef")
    for kind in TransportKind:  # every transport's ids have the shape the logs and the record directory know
        minted = new_session_id(kind, "gw-1")
        assert parse_call_id(minted) == (kind.value, "gw-1") and minted.startswith(kind.id_prefix + "_")
    derived = GatewayConfig(port=8123).instance
    assert derived.endswith("-8123") and "_" not in derived
    with pytest.raises(ValueError, match="instance_id"):
        GatewayConfig(instance_id="bad_id")


@pytest.mark.parametrize("prefix", ["rtc", "ws", "sip"])
def test_redaction_keeps_the_instance_and_8_hex_digits(prefix):
    call = f"{prefix}_gw-1_0123456789abcdef0123456789abcdef"
    assert redact_call_id(call) == f"{prefix}_gw-1_01234567..."
    assert redact_call_id(f"{prefix}_" + "ab" * 16) == f"{prefix}_abababab..."
    text = redact_text(f"DELETE /v1/realtime/calls/{call}/hangup key ek_abcdefghijkl1234 Bearer sk-123 x", ["sk-xyz"])
    assert call not in text and f"{prefix}_gw-1_01234567..." in text
    assert "ek_abcdefghijkl1234" not in text and "sk-123" not in text
    # As the SIP and WebSocket legs log them (a message naming the call, and the call's own field).
    line = redact_text(f"{prefix} session {call} ended: caller_bye; call {call}: BYE not answered")
    assert call not in line and line.count(f"{prefix}_gw-1_01234567...") == 2


def test_redaction_leaves_words_that_only_end_like_a_prefix():
    text = "news_gw-1_0123456789abcdef0123456789abcdef and bws_0123456789abcdef0123456789abcdef"
    assert redact_text(text) == text


async def test_json_lines_carry_the_call_in_tasks_and_threads(captured):
    configure_logging("INFO", "json", instance="gw-1", secrets=["sk-configured-secret"], stream=captured)
    log = logging.getLogger("gateway.test")
    log.info("outside any call")

    async def call_task() -> None:
        await asyncio.sleep(0)
        log.info("in a task of the call, key %s", "sk-configured-secret")

    token = bind_call(CALL)
    try:
        task = asyncio.ensure_future(call_task())  # created inside the call: inherits it
    finally:
        CALL_ID.reset(token)
    await task

    def stage_thread() -> None:
        bind_call(CALL)
        log.warning("stage thread working for %s", CALL)
        try:
            raise RuntimeError(f"failed for {CALL}")
        except RuntimeError:
            log.exception("with a traceback")

    thread = threading.Thread(target=stage_thread, name="unit0-stt")
    thread.start()
    thread.join()

    entries = lines(captured)
    assert [e["call"] for e in entries] == ["-", "rtc_gw-1_01234567...", "rtc_gw-1_01234567...", "rtc_gw-1_01234567..."]
    assert all(e["instance"] == "gw-1" and e["logger"] == "gateway.test" for e in entries)
    assert entries[1]["message"].endswith("key [redacted]")
    assert entries[2]["thread"] == "unit0-stt" and entries[2]["level"] == "WARNING"
    assert "RuntimeError" in entries[3]["exc"]
    assert CALL not in captured.getvalue() and "sk-configured-secret" not in captured.getvalue()


def test_text_format_shows_the_call(captured):
    configure_logging("INFO", "text", stream=captured)
    token = bind_call(CALL)
    try:
        logging.getLogger("gateway.test").info("hello")
    finally:
        CALL_ID.reset(token)
    assert "INFO gateway.test [rtc_gw-1_01234567...]: hello" in captured.getvalue()
    with pytest.raises(ValueError, match="log_format"):
        GatewayConfig(log_format="xml")
