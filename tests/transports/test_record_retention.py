"""The record directory's retention: calls (WAV and report together) older than the retention or
beyond the count are deleted, the newest kept; work files of this instance left by a process that
died mid-call are removed at start, another instance's are not."""

from __future__ import annotations

import os
import time

import pytest

from gateway.config import GatewayConfig
from gateway.transports.call_record import CallRecord, RecordPolicy, prepare_directory, prune


def make_call(directory, call_id: str, age_days: float, now: float) -> None:
    for ext in ("wav", "json"):
        path = directory / f"{call_id}.{ext}"
        path.write_bytes(b"x")
        mtime = now - age_days * 86400
        os.utime(path, (mtime, mtime))


def names(directory) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_calls_older_than_the_retention_are_deleted(tmp_path):
    now = time.time()
    make_call(tmp_path, "rtc_a_old", 31, now)
    make_call(tmp_path, "rtc_a_new", 1, now)
    (tmp_path / "notes.txt").write_text("not a recording")
    deleted = prune(RecordPolicy(tmp_path, retention_days=30), now=now)
    assert deleted == 1
    assert names(tmp_path) == {"rtc_a_new.wav", "rtc_a_new.json", "notes.txt"}


def test_the_newest_calls_are_kept_up_to_the_count(tmp_path):
    now = time.time()
    for index in range(5):
        make_call(tmp_path, f"ws_a_{index}", age_days=index, now=now)  # 0 is the newest
    prune(RecordPolicy(tmp_path, retention_days=0, max_calls=2), now=now)
    assert names(tmp_path) == {"ws_a_0.wav", "ws_a_0.json", "ws_a_1.wav", "ws_a_1.json"}


def test_at_start_the_directory_is_made_and_this_instance_s_work_files_removed(tmp_path):
    directory = tmp_path / "calls" / "2026"
    config = GatewayConfig(record_dir=str(directory), record_retention_days=30, instance_id="gw1")
    prepare_directory(RecordPolicy.from_config(config), config.instance)
    assert directory.is_dir()
    (directory / ".partial-rtc_gw1_abc.caller.raw").write_bytes(b"x")
    (directory / ".partial-rtc_gw2_def.caller.raw").write_bytes(b"x")  # another instance's live call
    make_call(directory, "rtc_gw1_old", 40, time.time())
    prepare_directory(RecordPolicy.from_config(config), config.instance)
    assert names(directory) == {".partial-rtc_gw2_def.caller.raw"}


def test_recording_is_off_by_default():
    policy = RecordPolicy.from_config(GatewayConfig())
    assert policy.directory is None and not policy.all_calls


def test_report_items_are_as_a_client_sees_them_without_audio(tmp_path):
    record = CallRecord(tmp_path, "ws_a_1", "websocket", started_at=time.monotonic())
    items = [
        {
            "id": "i1",
            "type": "message",
            "role": "user",
            "_audio_ms": 900,
            "content": [{"type": "input_audio", "audio": "AAAA", "transcript": "hello"}],
        },
        {"id": "i2", "type": "function_call", "name": "get_weather", "arguments": "{}", "call_id": "c1"},
    ]
    report = record.report(
        ended_at=time.monotonic(), end_reason="idle_timeout", message=None, items=items, key_presses=["5"]
    )
    record.discard()
    assert report["items"][0] == {
        "id": "i1",
        "type": "message",
        "role": "user",
        "content": [{"type": "input_audio", "transcript": "hello"}],
    }
    assert report["items"][1]["name"] == "get_weather" and items[0]["content"][0]["audio"] == "AAAA"
    assert report["end_reason"] == "idle_timeout" and report["key_presses"] == ["5"]


def test_every_call_mode_needs_a_directory():
    with pytest.raises(ValueError, match="record_dir"):
        GatewayConfig(record_all_calls=True)
