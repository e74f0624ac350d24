"""The record directory: the calls' files (WAV and report together, named by call id) older than
the retention or beyond the count are deleted, the newest kept, and no other file is ever read,
counted or deleted; the report is written whatever happens to the audio (a full disk, a WAV that
fails); at start, work files this instance left (a process that died mid-call, a WAV that could
not be written) are salvaged into a WAV and a report marked incomplete, another instance's are
left alone; files are private (0600, the directory 0700)."""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
import wave

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.media import recording as recording_module
from gateway.transports.call_record import (
    CallRecord,
    RecordPolicy,
    _own_files,
    prepare_directory,
    prune,
    recorded_bytes,
)
from tests.doubles import DiskFullOnceFileDouble

DAY = 86400


def call_id(number: int, instance: str = "gw1", prefix: str = "rtc") -> str:
    return f"{prefix}_{instance}_{number:032x}"


def make_call(directory, call: str, age_days: float, now: float) -> None:
    for ext in ("wav", "json"):
        make_file(directory / f"{call}.{ext}", age_days, now)


def make_file(path, age_days: float, now: float, data: bytes = b"x") -> None:
    path.write_bytes(data)
    mtime = now - age_days * DAY
    os.utime(path, (mtime, mtime))


def names(directory) -> set[str]:
    return {p.name for p in directory.iterdir()}


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_calls_older_than_the_retention_are_deleted(tmp_path):
    now = time.time()
    make_call(tmp_path, call_id(1), 31, now)
    make_call(tmp_path, call_id(2, prefix="sip"), 1, now)
    deleted = prune(RecordPolicy(tmp_path, retention_days=30), now=now)
    assert deleted == 1
    assert names(tmp_path) == {f"{call_id(2, prefix='sip')}.wav", f"{call_id(2, prefix='sip')}.json"}


def test_files_that_are_not_the_gateway_s_are_never_deleted_nor_counted(tmp_path):
    """An operator points the record directory at a folder that holds other files (all 31 days old)."""
    now = time.time()
    foreign = [
        "package.json",
        "settings.json",
        "voicemail-greeting.wav",
        "rtc_gw_0123.wav",  # looks like a call, but no gateway id
        f"{call_id(3)}.wav.bak",
        f"RTC_GW1_{3:032X}.wav",
        ".partial-greeting.wav",
        "notes.txt",
    ]
    for name in foreign:
        make_file(tmp_path / name, 31, now)
    make_call(tmp_path, call_id(1, prefix="ws"), 31, now)
    assert prune(RecordPolicy(tmp_path, retention_days=30), now=now) == 1
    assert names(tmp_path) == set(foreign)
    # Nor counted: with one call kept, the foreign files do not push it out.
    make_call(tmp_path, call_id(2), 0, now)
    assert prune(RecordPolicy(tmp_path, retention_days=0, max_calls=1), now=now) == 0
    assert names(tmp_path) == {*foreign, f"{call_id(2)}.wav", f"{call_id(2)}.json"}


def test_foreign_files_are_reported_once_at_start(tmp_path, caplog):
    (tmp_path / "package.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a recording")
    make_call(tmp_path, call_id(1), 0, time.time())
    with caplog.at_level(logging.WARNING, logger="gateway.transports.call_record"):
        prepare_directory(RecordPolicy(tmp_path, retention_days=30), "gw1")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "2 file(s)" in warnings[0] and "notes.txt, package.json" in warnings[0]
    assert names(tmp_path) == {"package.json", "notes.txt", f"{call_id(1)}.wav", f"{call_id(1)}.json"}


def test_the_newest_calls_are_kept_up_to_the_count(tmp_path):
    now = time.time()
    for index in range(5):
        make_call(tmp_path, call_id(index, prefix="ws"), age_days=index, now=now)  # 0 is the newest
    prune(RecordPolicy(tmp_path, retention_days=0, max_calls=2), now=now)
    assert names(tmp_path) == {f"{call_id(i, prefix='ws')}.{ext}" for i in (0, 1) for ext in ("wav", "json")}


def test_at_start_a_dead_process_s_call_is_salvaged_and_another_instance_s_left_alone(tmp_path):
    """Work files this instance left (the process died mid-call: no report, raw audio on disk, a
    half-written WAV) become ``<id>.wav`` and a report marked incomplete."""
    directory = tmp_path / "calls" / "2026"
    config = GatewayConfig(record_dir=str(directory), record_retention_days=30, instance_id="gw1")
    prepare_directory(RecordPolicy.from_config(config), config.instance)
    assert directory.is_dir()
    rng = np.random.default_rng(7)
    caller = rng.integers(-8000, 8000, 16000).astype("<i2")  # 1 s
    assistant = rng.integers(-8000, 8000, 8000).astype("<i2")  # 0.5 s
    dead, live = call_id(9, prefix="sip"), call_id(9, instance="gw2")
    now = time.time()
    make_file(directory / f".partial-{dead}.caller.raw", 0.01, now, caller.tobytes() + b"\x01")  # an odd byte
    make_file(directory / f".partial-{dead}.assistant.raw", 0.01, now, assistant.tobytes())
    make_file(directory / f".partial-{dead}.wav", 0.01, now, b"RIFF")
    make_file(directory / f".partial-{live}.caller.raw", 0.01, now)  # another instance's live call
    make_call(directory, call_id(1), 40, now)
    prepare_directory(RecordPolicy.from_config(config), config.instance)

    assert names(directory) == {f"{dead}.wav", f"{dead}.json", f".partial-{live}.caller.raw"}
    with wave.open(str(directory / f"{dead}.wav"), "rb") as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getnframes()) == (2, 16000, 16000)
        frames = np.frombuffer(wav.readframes(16000), "<i2").reshape(-1, 2)
    assert np.array_equal(frames[:, 0], caller)
    assert np.array_equal(frames[:8000, 1], assistant) and not frames[8000:, 1].any()
    report = json.loads((directory / f"{dead}.json").read_text())
    assert report["call_id"] == dead and report["transport"] == "sip" and report["end_reason"] == "unknown"
    assert report["recording"]["complete"] is False and report["recording"]["salvaged"] is True
    assert report["recording"]["file"] == f"{dead}.wav" and report["recording"]["duration_s"] == 1.0
    assert report["duration_s"] == 1.0 and abs(report["ended_at_unix"] - (now - 0.01 * DAY)) < 1
    assert mode(directory / f"{dead}.wav") == mode(directory / f"{dead}.json") == 0o600


def test_the_directory_the_gateway_makes_is_private(tmp_path):
    old = os.umask(0o022)
    try:
        prepare_directory(RecordPolicy(tmp_path / "calls"), "gw1")
    finally:
        os.umask(old)
    assert mode(tmp_path / "calls") == 0o700


def one_call(directory, fail_at: int = 0) -> tuple[CallRecord, float, np.ndarray]:
    """3 s of caller audio (20 ms chunks, random) recorded as call ``call_id(5)``; with
    ``fail_at``, the caller file's write of that number meets a full disk once."""
    t0 = time.monotonic() - 10
    record = CallRecord(directory, call_id(5), "webrtc", t0)
    if fail_at:
        record.audio._caller.file = DiskFullOnceFileDouble(record.audio._caller.file, fail_at=fail_at)
    caller = np.random.default_rng(11).integers(-8000, 8000, 150 * 320).astype(np.int16)
    for index in range(150):
        record.audio.caller(caller[index * 320 : (index + 1) * 320], 16000, t0 + 0.02 * (index + 1))
    return record, t0, caller


def written_report(record: CallRecord, t0: float) -> dict:
    """What the hang-up does (``LiveSession._write_record``): the report, then both files."""
    report = record.report(ended_at=t0 + 3, end_reason="caller_bye", message=None, items=[], key_presses=[])
    record.write(t0 + 3, report)
    return json.loads((record.directory / f"{record.call_id}.json").read_text())


def test_a_full_disk_mid_call_still_leaves_the_report_and_the_audio_that_reached_the_disk(tmp_path):
    """One failed write at 2 s of a 3 s call: the report, marked incomplete, and a WAV of the
    first 0.98 s (what reached the disk)."""
    record, t0, caller = one_call(tmp_path, fail_at=50)
    report = written_report(record, t0)
    assert report["end_reason"] == "caller_bye" and report["duration_s"] == 3.0
    written = 49 * 320 + 150
    assert report["recording"]["complete"] is False and report["recording"]["error"] == "No space left on device"
    assert report["recording"]["duration_s"] == round(written / 16000, 3)
    with wave.open(str(tmp_path / report["recording"]["file"]), "rb") as wav:
        frames = np.frombuffer(wav.readframes(wav.getnframes()), "<i2").reshape(-1, 2)
    assert np.array_equal(frames[:, 0], caller[:written])
    assert names(tmp_path) == {f"{call_id(5)}.wav", f"{call_id(5)}.json"}
    assert mode(tmp_path / f"{call_id(5)}.wav") == mode(tmp_path / f"{call_id(5)}.json") == 0o600


def test_a_whole_call_is_marked_complete(tmp_path):
    record, t0, _ = one_call(tmp_path)
    report = written_report(record, t0)
    assert report["recording"]["complete"] is True and "error" not in report["recording"]
    assert report["recording"]["duration_s"] == 3.0


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), ValueError("a bug")])
def test_a_wav_that_cannot_be_written_loses_no_report_and_is_salvaged_at_the_next_start(tmp_path, monkeypatch, failure):
    record, t0, caller = one_call(tmp_path)

    def failing(*args, **kwargs):
        raise failure

    monkeypatch.setattr(recording_module, "write_stereo_wav", failing)
    report = written_report(record, t0)
    assert report["recording"]["file"] is None and report["recording"]["complete"] is False
    assert report["recording"]["error"] in ("No space left on device", "ValueError: a bug")
    assert f".partial-{call_id(5)}.caller.raw" in names(tmp_path)  # kept for the next start

    monkeypatch.undo()
    prepare_directory(RecordPolicy(tmp_path), "gw1")
    assert names(tmp_path) == {f"{call_id(5)}.wav", f"{call_id(5)}.json"}
    salvaged = json.loads((tmp_path / f"{call_id(5)}.json").read_text())
    assert salvaged["end_reason"] == "caller_bye"  # the report of the hang-up, its recording filled in
    assert salvaged["recording"]["salvaged"] is True and salvaged["recording"]["duration_s"] == 3.0
    with wave.open(str(tmp_path / f"{call_id(5)}.wav"), "rb") as wav:
        frames = np.frombuffer(wav.readframes(wav.getnframes()), "<i2").reshape(-1, 2)
    assert np.array_equal(frames[:, 0], caller)


def test_recording_is_off_by_default():
    policy = RecordPolicy.from_config(GatewayConfig())
    assert policy.directory is None and not policy.all_calls


def test_report_items_are_as_a_client_sees_them_without_audio(tmp_path):
    record = CallRecord(tmp_path, call_id(1, prefix="ws"), "websocket", started_at=time.monotonic())
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


def test_recorded_bytes_counts_what_the_one_classifier_calls_the_gateways(tmp_path):
    """``recorded_bytes`` (the disk bound's measure) repeated ``_own_files``' classification of the
    directory with its own copy of the patterns; now it sums the call and work files of
    ``_own_files``, so the two cannot disagree on what is the gateway's."""
    ours = {
        f"{call_id(1)}.wav": 3000,
        f"{call_id(1)}.json": 200,
        f".partial-{call_id(2)}.caller.raw": 640,
        f".partial-{call_id(2)}.assistant.raw": 320,
        f".partial-{call_id(3, prefix='sip')}.json": 10,
    }
    foreign = {"notes.txt": 100_000, f"{call_id(4)}.mp3": 7, f"x{call_id(5)}.wav": 9, ".partial-nope.wav": 11}
    for name, size in {**ours, **foreign}.items():
        (tmp_path / name).write_bytes(b"\0" * size)
    calls, work, others = _own_files(list(os.scandir(tmp_path)))
    classified = sum(entry.stat().st_size for files in (*calls.values(), *work.values()) for entry in files)
    assert recorded_bytes(tmp_path) == classified == sum(ours.values())
    assert sorted(others) == sorted(foreign)
