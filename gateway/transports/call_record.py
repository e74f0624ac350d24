"""A recorded call: its stereo WAV and its JSON report, written when the call ends, and the
retention of the directory they go to.

Recording is the operator's: nothing is recorded unless ``record_dir`` is set. Then a session
asks for it with the gateway extension ``"recording": true`` in its session config (an offer's,
a client_secrets request's or a ``session.update``'s), or every call is recorded
(``record_all_calls``; a client cannot turn that off). A client never names a path: the files are
``<record_dir>/<call id>.wav`` and ``<record_dir>/<call id>.json``.

- The WAV (``gateway.media.recording``): 16-bit PCM, 16 kHz, stereo, the caller on the left, the
  assistant on the right as it was played out (silence between replies, cut at barge-in), both
  from the moment recording started (normally the start of the call).
- The report (:meth:`CallRecord.report`): the call's id, transport, start and end (UTC ISO 8601
  and Unix s), length, end reason, the conversation items as a client would retrieve them (user
  transcripts, assistant messages, function calls and their outputs; audio left out), one entry a
  turn with its stage latencies in ms (the ``gateway.latency`` stages), the key presses, and the
  WAV's file name.

Both are written beside their final names and renamed into place (atomic): a reader never sees
half a file. The report is written whatever happens to the audio: a recording stopped by a failed
write (disk full) gets the WAV of what reached the disk, and ``recording.complete`` false with the
``error``; a WAV that cannot be written at all leaves its work files for the next start.

The directory: the gateway's files are named by call id (``gateway.call_ids``):
``<id>.wav``, ``<id>.json`` and the work files ``.partial-<id>.*`` (:data:`PARTIAL_PREFIX`); it
never reads, counts or deletes another file, and warns once at start when there are others. Files
are made 0600, and the directory 0700 when the gateway makes it. :func:`prepare_directory` (at
start) makes it, salvages this instance's work files left by a process that died mid-call (or by a
WAV that could not be written) into ``<id>.wav`` and a report marked incomplete, and applies the
retention; :func:`prune` (the retention: ``record_retention_days``, ``record_max_calls``) also runs
after each call written.

The disk a client may fill (:func:`disk_refusal`, checked as each recording starts, a new one
refused, never one being made cut): a recording a session asks for does not start while the
directory's recordings (its call files and work files, :func:`recorded_bytes`, as last measured off
the event loop: ``gateway.transports.record_usage``) take ``record_max_bytes`` or more, and no
recording starts while the directory's disk has less than ``record_min_free_bytes`` free
(``record_all_calls``: the call goes on unrecorded, logged). At about 64 KB/s a recorded call,
the recordings being made may pass the bound by what they record until they end.
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
import os
import re
import shutil
import time
import wave
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gateway.call_ids import CALL_ID_PATTERN, parse_call_id
from gateway.config import GatewayConfig
from gateway.media.recording import RATE, StereoRecording, open_private, raw_samples, work_file, write_stereo_wav
from gateway.pipeline.latency import STAGES
from gateway.realtime.events import public_item

log = logging.getLogger(__name__)

PARTIAL_PREFIX = ".partial-"  # work files of calls being recorded (hidden; never pruned as calls)
TURNS_KEPT = 1000  # latency entries a report keeps (the newest)
CHANNELS = ("caller", "assistant")  # the WAV's left and right channels
_CALL_FILE = re.compile(rf"(?P<id>{CALL_ID_PATTERN})\.(?:wav|json)")
_WORK_FILE = re.compile(
    rf"{re.escape(PARTIAL_PREFIX)}(?P<id>{CALL_ID_PATTERN})\.(?:caller\.raw|assistant\.raw|wav|json)"
)


@dataclass(frozen=True)
class RecordPolicy:
    """The operator's recording settings: ``directory`` (None: nothing is recorded), ``all_calls``
    (every call, not only those that ask), ``retention_days`` (0: kept), ``max_calls`` (0: no limit),
    ``max_bytes`` (the recordings a session may ask to add to; 0: no limit) and ``min_free_bytes``
    (the disk's free space below which none starts; 0: no floor)."""

    directory: Optional[Path]
    all_calls: bool = False
    retention_days: float = 0.0
    max_calls: int = 0
    max_bytes: int = 0
    min_free_bytes: int = 0

    @property
    def bytes_bounded(self) -> bool:
        """True when a recording a session asks for is held to ``max_bytes`` (a directory, a bound,
        and not every call recorded)."""
        return self.directory is not None and self.max_bytes > 0 and not self.all_calls

    @classmethod
    def from_config(cls, config: GatewayConfig) -> RecordPolicy:
        """The policy of ``config``'s ``record_*`` settings."""
        directory = Path(config.record_dir).expanduser() if config.record_dir else None
        return cls(
            directory,
            config.record_all_calls,
            config.record_retention_days,
            config.record_max_calls,
            config.record_max_bytes,
            config.record_min_free_bytes,
        )


class CallRecord:
    """The recording of one call (``call_id``, ``transport`` a TransportKind value) started at
    ``started_at`` (monotonic s) into ``directory``. Raises OSError when its work files cannot be
    made. On the event loop, except :meth:`write`."""

    def __init__(self, directory: Path, call_id: str, transport: str, started_at: float) -> None:
        self.directory = directory
        self.call_id = call_id
        self.transport = transport
        self.started_at = started_at
        self.started_epoch = time.time() - (time.monotonic() - started_at)
        self.audio = StereoRecording(directory / f"{PARTIAL_PREFIX}{call_id}", started_at)
        self.turns: list[dict[str, Any]] = []

    def turn_latency(self, response_id: Optional[str], latency_ms: dict[str, Optional[float]]) -> None:
        """A turn's stage latencies (ms, ``TurnLatency.as_ms``) of response ``response_id``."""
        self.turns = [*self.turns[-(TURNS_KEPT - 1) :], {"response_id": response_id, "latency_ms": dict(latency_ms)}]

    def report(
        self,
        *,
        ended_at: float,
        end_reason: str,
        message: Optional[str],
        items: list[dict],
        key_presses: list[str],
    ) -> dict[str, Any]:
        """The report of the call (a JSON object; see the module's docstring). ``ended_at``
        monotonic s; ``items`` the conversation's (copied, audio left out); ``recording`` stays
        None until :meth:`write` has written the WAV."""
        report = _report(self.call_id, self.transport, self.started_epoch, ended_at - self.started_at)
        report.update(
            end_reason=end_reason,
            end_message=message,
            items=[_without_audio(item) for item in items],
            turns=list(self.turns),
            key_presses=list(key_presses),
        )
        return report

    def write(self, ended_at: float, report: dict[str, Any]) -> None:
        """Write ``<call id>.wav`` and ``<call id>.json`` (blocking: run it off the event loop).
        ``report`` is :meth:`report`'s; its ``recording`` becomes the WAV's entry
        (:func:`recording_entry`: ``complete`` false with the ``error`` when the recording stopped
        early) or, when no WAV could be written, ``{"file": null, "complete": false, "error"}``
        (logged; the work files are kept and salvaged at the next start). The report is written
        whatever the WAV did; raises OSError when it cannot be."""
        try:
            seconds = self.audio.finish(self.directory / f"{self.call_id}.wav", ended_at)
        except Exception as exc:
            log.exception("%s: the recording could not be written (its work files are kept)", self.call_id)
            report["recording"] = {"file": None, "complete": False, "error": _reason(exc)}
        else:
            report["recording"] = recording_entry(self.call_id, seconds, self.audio.error)
        _write_json(self.directory, self.call_id, report)

    def discard(self) -> None:
        """Drop the work files (blocking)."""
        self.audio.discard()


def recording_entry(call_id: str, seconds: float, error: Optional[str] = None) -> dict[str, Any]:
    """A report's ``recording``: the WAV ``<call_id>.wav`` of ``seconds``, ``complete`` unless an
    ``error`` stopped the recording early (then the WAV holds the audio up to that point)."""
    entry: dict[str, Any] = {
        "file": f"{call_id}.wav",
        "format": "wav",
        "sample_rate": RATE,
        "channels": list(CHANNELS),
        "duration_s": round(seconds, 3),
        "complete": error is None,
    }
    if error is not None:
        entry["error"] = error
    return entry


def _report(call_id: str, transport: Optional[str], started_epoch: float, duration_s: float) -> dict[str, Any]:
    """A report's fields, in order, those past the times empty."""
    ended_epoch = started_epoch + duration_s
    return {
        "call_id": call_id,
        "transport": transport,
        "started_at": _iso(started_epoch),
        "ended_at": _iso(ended_epoch),
        "started_at_unix": round(started_epoch, 3),
        "ended_at_unix": round(ended_epoch, 3),
        "duration_s": round(duration_s, 3),
        "end_reason": None,
        "end_message": None,
        "recording": None,
        "items": [],
        "turns": [],
        "latency_stages": [{"name": key, "label": label} for key, label in STAGES],
        "key_presses": [],
    }


def _write_json(directory: Path, call_id: str, report: dict[str, Any]) -> None:
    """Write ``<call_id>.json`` (0600) through its work name. Raises OSError."""
    partial = directory / f"{PARTIAL_PREFIX}{call_id}.json"
    try:
        with open_private(partial, "w", encoding="utf-8") as out:
            out.write(json.dumps(report, indent=1, ensure_ascii=False))
        os.replace(partial, directory / f"{call_id}.json")
    finally:
        partial.unlink(missing_ok=True)


def _reason(exc: BaseException) -> str:
    """An error as a report says it: the OS's words for an OSError (no path), else the exception."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="milliseconds")


def _without_audio(item: dict) -> dict:
    """A conversation item as a client retrieves it (``public_item``: no private ``_`` keys),
    without audio payloads (an ``input_audio`` part's ``audio``)."""
    item = copy.deepcopy(public_item(item))
    for part in item.get("content") or []:
        if isinstance(part, dict):
            part.pop("audio", None)
    return item


def _own_files(
    entries: list[os.DirEntry[str]],
) -> tuple[dict[str, list[os.DirEntry[str]]], dict[str, list[os.DirEntry[str]]], list[str]]:
    """The directory ``entries`` sorted: call files by call id, work files by call id, and the
    names of every other entry (foreign: never touched). The one classifier of the directory."""
    calls: dict[str, list[os.DirEntry[str]]] = defaultdict(list)
    work: dict[str, list[os.DirEntry[str]]] = defaultdict(list)
    foreign = []
    for entry in entries:
        if found := _CALL_FILE.fullmatch(entry.name):
            calls[found["id"]].append(entry)
        elif found := _WORK_FILE.fullmatch(entry.name):
            work[found["id"]].append(entry)
        else:
            foreign.append(entry.name)
    return calls, work, foreign


def recorded_bytes(directory: Path) -> int:
    """The bytes of the gateway's files in ``directory``: call files and work files
    (:func:`_own_files`; not the others). Blocking (a scan of the directory and one ``stat`` a
    file: ~110 ms at 20,000 files on 2 cores): run it off the event loop (``gateway.transports.record_usage``)."""
    calls, work, _foreign = _own_files(_scan(directory) or [])
    total = 0
    for files in (*calls.values(), *work.values()):
        for entry in files:
            try:
                total += entry.stat().st_size
            except OSError:
                continue  # deleted meanwhile
    return total


def disk_refusal(policy: RecordPolicy, recorded: Callable[[], int]) -> Optional[tuple[str, str]]:
    """Why no new recording may start now, or None: (the setting reached, the measure for the log):
    ``record_min_free_bytes`` when the directory's disk has less free, ``record_max_bytes`` (unless
    every call is recorded) when its recordings take that or more: ``recorded()`` bytes (asked only
    then; :meth:`~gateway.transports.record_usage.RecordUsage.last`, measured off the event loop).
    Blocking for a ``statvfs``."""
    directory = policy.directory
    if directory is None:
        return None
    if policy.min_free_bytes > 0:
        try:
            free = shutil.disk_usage(directory).free
        except OSError as exc:
            return "record_dir", f"the record directory cannot be read: {_reason(exc)}"
        if free < policy.min_free_bytes:
            return "record_min_free_bytes", f"{free} bytes free, under {policy.min_free_bytes}"
    if policy.bytes_bounded:
        used = recorded()
        if used >= policy.max_bytes:
            return "record_max_bytes", f"the recordings take {used} bytes, at least {policy.max_bytes}"
    return None


def _scan(directory: Path) -> Optional[list[os.DirEntry[str]]]:
    try:
        return list(os.scandir(directory))
    except OSError as exc:
        log.error("record directory %s: %s", directory, exc)
        return None


def prune(policy: RecordPolicy, now: Optional[float] = None) -> int:
    """Apply the retention to ``policy.directory``: delete the calls (``<id>.wav`` and
    ``<id>.json`` together) older than ``retention_days`` (by the newest file's mtime), then the
    oldest beyond ``max_calls``. Only the gateway's call files count (names of call ids; work
    files and other files are never touched). Returns the number of calls deleted; errors are
    logged. Blocking."""
    directory = policy.directory
    entries = _scan(directory) if directory is not None else None
    if directory is None or entries is None:
        return 0
    now = time.time() if now is None else now
    calls: dict[str, float] = {}
    for call_id, files in _own_files(entries)[0].items():
        try:
            calls[call_id] = max(entry.stat().st_mtime for entry in files if entry.is_file())
        except (OSError, ValueError):
            continue  # deleted meanwhile (another call's prune), or not files
    doomed = set()
    if policy.retention_days > 0:
        cutoff = now - policy.retention_days * 86400
        doomed |= {call_id for call_id, mtime in calls.items() if mtime < cutoff}
    if policy.max_calls > 0:
        kept = sorted((c for c in calls if c not in doomed), key=lambda call_id: calls[call_id], reverse=True)
        doomed |= set(kept[policy.max_calls :])
    for call_id in doomed:
        for ext in ("wav", "json"):
            _remove(directory / f"{call_id}.{ext}")
    if doomed:
        log.info("record retention: deleted %d call(s) from %s", len(doomed), directory)
    return len(doomed)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not delete %s: %s", path, exc)


def salvage(directory: Path, call_id: str) -> None:
    """Make what the work files of ``call_id`` hold (a process that died mid-call, or a WAV that
    could not be written at hang-up) its WAV, unless it has one, and its report: the one written at
    hang-up (or left under its work name), else a new one from what the files tell (``end_reason``
    ``"unknown"``, the times from the audio's length and the files' modification time), its
    ``recording`` marked ``salvaged`` and not ``complete``. Then the work files are removed.
    Raises OSError (the work files are kept then), ValueError for a report that is no JSON.
    Blocking."""
    prefix = directory / f"{PARTIAL_PREFIX}{call_id}"
    raws = [work_file(prefix, channel) for channel in CHANNELS]
    leftovers = [prefix.with_name(prefix.name + ext) for ext in (".wav", ".json")]
    final_wav, final_json = directory / f"{call_id}.wav", directory / f"{call_id}.json"
    present = [raw if raw.exists() else None for raw in raws]
    if any(present) and not final_wav.exists():
        write_stereo_wav(leftovers[0], present[0], present[1], max(raw_samples(raw) for raw in raws))
        os.replace(leftovers[0], final_wav)
    if final_wav.exists():
        with wave.open(str(final_wav), "rb") as wav:
            seconds = wav.getnframes() / wav.getframerate()
        written = [raw.stat().st_mtime for raw in present if raw is not None]  # the last audio written
        ended = max(written) if written else final_wav.stat().st_mtime
        report = _report_left(final_json, leftovers[1])
        if report is None:
            parsed = parse_call_id(call_id)
            report = _report(call_id, parsed[0] if parsed else None, ended - seconds, seconds)
            report.update(end_reason="unknown", end_message="the gateway stopped during the call")
        if any(present) or not (report.get("recording") or {}).get("file"):  # else: finished, but not renamed
            error = "the gateway stopped before the call's recording was finished"
            report["recording"] = {**recording_entry(call_id, seconds, error), "salvaged": True}
        _write_json(directory, call_id, report)
    for path in [*raws, *leftovers]:
        path.unlink(missing_ok=True)


def _report_left(final: Path, partial: Path) -> Optional[dict[str, Any]]:
    """The report written at hang-up (``final``), else one whole under its work name
    (``partial``: the process died before renaming it), else None. Raises ValueError for a
    ``final`` that is no JSON object."""
    if final.exists():
        report = json.loads(final.read_text(encoding="utf-8"))
        if not isinstance(report, dict):
            raise ValueError(f"{final.name} is no JSON object")
        return report
    try:
        report = json.loads(partial.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # none, or half written
    return report if isinstance(report, dict) else None


def prepare_directory(policy: RecordPolicy, instance: str) -> None:
    """At start: make the record directory (0700, and its parents), salvage this instance's work
    files (:func:`salvage`; another instance's may belong to its live calls), warn once when the
    directory holds files that are not the gateway's (they are never touched), and apply the
    retention. Raises OSError when the directory cannot be made. Blocking."""
    directory = policy.directory
    if directory is None:
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    directory.mkdir(mode=0o700, exist_ok=True)
    entries = _scan(directory) or []
    _calls, work, foreign = _own_files(entries)
    for call_id in work:
        parsed = parse_call_id(call_id)
        if parsed is None or parsed[1] != instance:
            continue
        try:
            salvage(directory, call_id)
            log.warning("%s: recording salvaged from the work files of a call that did not finish", call_id)
        except Exception as exc:  # never stops the start; the work files stay for the next one
            log.error("%s: the work files of a call that did not finish could not be salvaged: %s", call_id, exc)
    if foreign:
        shown = ", ".join(sorted(foreign)[:5]) + (", ..." if len(foreign) > 5 else "")
        log.warning(
            "record directory %s holds %d file(s) that are not call recordings (%s): they are never deleted "
            "or counted, but give the recordings a directory of their own",
            directory,
            len(foreign),
            shown,
        )
    prune(policy)
