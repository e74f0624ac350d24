"""Any client filling the operator's disk with recordings: with ``record_dir`` set, every session
may ask ``"recording": true`` (~64 KB/s a call; ``record_max_calls`` unlimited and 30 days kept by
default). Before: recordings started whatever the directory held and whatever the disk had left.
Now a session asking is refused ``recording_unavailable`` (naming the setting; the session goes
on) while the directory's recordings take ``record_max_bytes`` (4 GiB by default) or the disk
has less than ``record_min_free_bytes`` free (1 GiB); a gateway recording every call
(``record_all_calls``) is bound by the free-space floor only, and its call goes on unrecorded."""

from __future__ import annotations

import threading

from gateway.server.app_keys import SESSIONS
from gateway.transports import call_record, record_usage
from tests.helpers import app_idle, serve, wait_until
from tests.transports.websocket.ws_client import EventClient

OLD_CALL = f"rtc_gw1_{7:032x}"  # a call recorded earlier, 4000 bytes on disk


async def _ask_recording(url: str) -> list[dict]:
    """A WebSocket session that asks to be recorded, then changes its instructions: its errors."""
    async with EventClient(url) as client:
        await client.wait_for("session.created", timeout=10)
        await client.send("session.update", session={"type": "realtime", "recording": True})
        await client.send("session.update", session={"type": "realtime", "instructions": "Be brief."})
        assert await wait_until(lambda: _updated(client.events, "Be brief."), 10)  # the session goes on
        return [event["error"] for event in client.events if event["type"] == "error"]


def _updated(events: list[dict], instructions: str) -> bool:
    return any(e["type"] == "session.updated" and e["session"]["instructions"] == instructions for e in events)


async def test_a_session_cannot_record_past_the_directory_bound(models, gateway_config, tmp_path, monkeypatch):
    """The call that just ended counts at once: the directory's measure after its write is held in
    flight here (a slow disk, a big directory), and the next session asks for a recording meanwhile.
    Before: the bound read the measure from before that call (4000 bytes) and the recording started
    (the test had to wait for the measure to end, 2c320c0)."""
    (tmp_path / f"{OLD_CALL}.wav").write_bytes(b"\0" * 3000)
    (tmp_path / f"{OLD_CALL}.json").write_bytes(b"\0" * 1000)
    (tmp_path / "notes.txt").write_bytes(b"\0" * 100_000)  # not the gateway's: not counted
    measured = threading.Event()  # set: measures run; clear: each waits (in its worker thread)
    measured.set()

    def held_measure(directory):
        measured.wait(10)
        return call_record.recorded_bytes(directory)

    monkeypatch.setattr(record_usage, "recorded_bytes", held_measure)
    async with serve(gateway_config(record_dir=str(tmp_path), record_max_bytes=5000), models) as (url, app):
        try:
            assert await _ask_recording(url) == []  # 4000 bytes recorded: under the bound
            measured.clear()
            # its files written and its unit free again; the measure after the write still in flight
            assert await wait_until(lambda: len(list(tmp_path.glob("*_*.wav"))) == 2 and app_idle(app), 10)
            assert app[SESSIONS].sessions, "the first session should still wait for its measure"
            (error,) = await _ask_recording(url)  # now past it
        finally:
            measured.set()
        assert error["code"] == "recording_unavailable" and error["param"] == "session.recording"
        assert "record_max_bytes" in error["message"]
        assert await wait_until(lambda: app_idle(app), 10)
    assert len(list(tmp_path.glob("*_*.wav"))) == 2 and not list(tmp_path.glob(".partial-*"))


async def test_no_recording_starts_under_the_free_space_floor(models, gateway_config, tmp_path):
    floor = 2**62  # more than any disk has free
    async with serve(gateway_config(record_dir=str(tmp_path), record_min_free_bytes=floor), models) as (url, app):
        (error,) = await _ask_recording(url)
        assert error["code"] == "recording_unavailable" and "record_min_free_bytes" in error["message"]
        assert await wait_until(lambda: app_idle(app), 10)
    config = gateway_config(record_dir=str(tmp_path), record_all_calls=True, record_min_free_bytes=floor)
    async with serve(config, models) as (url, app):
        async with EventClient(url) as client:  # every call recorded: this one goes on unrecorded
            await client.wait_for("session.created", timeout=10)
            (session,) = app[SESSIONS].sessions.values()
            assert session.record is None
            await client.send("session.update", session={"type": "realtime", "instructions": "Be brief."})
            await client.wait_for("session.updated", timeout=10)
        assert await wait_until(lambda: app_idle(app), 10)
    assert list(tmp_path.iterdir()) == []


async def test_recording_every_call_is_not_held_to_the_directory_bound(models, gateway_config, tmp_path):
    (tmp_path / f"{OLD_CALL}.wav").write_bytes(b"\0" * 3000)
    config = gateway_config(record_dir=str(tmp_path), record_all_calls=True, record_max_bytes=1000)
    async with serve(config, models) as (url, app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            (session,) = app[SESSIONS].sessions.values()
            assert session.record is not None
        assert await wait_until(lambda: len(list(tmp_path.glob("ws_*.wav"))) == 1, 10)
        assert await wait_until(lambda: app_idle(app), 10)


async def test_the_directory_is_measured_off_the_event_loop(models, gateway_config, tmp_path, monkeypatch):
    """Failed before: each recording a session asked for scanned the record directory and
    ``stat``-ed its files on the event loop (~110 ms at 20,000 files, every call of the process
    waiting). Now every scan runs in a worker thread (at start, when a session opens, after a
    recorded call is written), and the bound still holds (the tests above)."""
    scans: list[bool] = []  # per scan: on the event loop's thread?
    scan = call_record._scan

    def watched(directory):
        scans.append(threading.current_thread() is threading.main_thread())
        return scan(directory)

    monkeypatch.setattr(call_record, "_scan", watched)
    (tmp_path / f"{OLD_CALL}.wav").write_bytes(b"\0" * 3000)
    async with serve(gateway_config(record_dir=str(tmp_path), record_max_bytes=5000), models) as (url, app):
        assert await _ask_recording(url) == []
        assert await wait_until(lambda: len(list(tmp_path.glob("*_*.wav"))) == 2 and app_idle(app), 10)
        (error,) = await _ask_recording(url)
        assert error["code"] == "recording_unavailable" and "record_max_bytes" in error["message"]
        assert await wait_until(lambda: app_idle(app), 10)
    assert scans and not any(scans), scans
