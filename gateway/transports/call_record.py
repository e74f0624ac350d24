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
half a file. :func:`prune` applies the retention (``record_retention_days``, ``record_max_calls``);
it runs when the gateway starts and after each call written.
"""

from __future__ import annotations

import copy
import datetime
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.media.recording import RATE, StereoRecording
from gateway.pipeline.latency import STAGES
from gateway.realtime.events import public_item

log = logging.getLogger(__name__)

PARTIAL_PREFIX = ".partial-"  # work files of calls being recorded (hidden; never pruned as calls)
TURNS_KEPT = 1000  # latency entries a report keeps (the newest)


@dataclass(frozen=True)
class RecordPolicy:
    """The operator's recording settings: ``directory`` (None: nothing is recorded), ``all_calls``
    (every call, not only those that ask), ``retention_days`` (0: kept), ``max_calls`` (0: no limit)."""

    directory: Optional[Path]
    all_calls: bool = False
    retention_days: float = 0.0
    max_calls: int = 0

    @classmethod
    def from_config(cls, config: GatewayConfig) -> RecordPolicy:
        """The policy of ``config``'s ``record_*`` settings."""
        directory = Path(config.record_dir).expanduser() if config.record_dir else None
        return cls(directory, config.record_all_calls, config.record_retention_days, config.record_max_calls)


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
        ended_epoch = self.started_epoch + (ended_at - self.started_at)
        return {
            "call_id": self.call_id,
            "transport": self.transport,
            "started_at": _iso(self.started_epoch),
            "ended_at": _iso(ended_epoch),
            "started_at_unix": round(self.started_epoch, 3),
            "ended_at_unix": round(ended_epoch, 3),
            "duration_s": round(ended_at - self.started_at, 3),
            "end_reason": end_reason,
            "end_message": message,
            "recording": None,
            "items": [_without_audio(item) for item in items],
            "turns": list(self.turns),
            "latency_stages": [{"name": key, "label": label} for key, label in STAGES],
            "key_presses": list(key_presses),
        }

    def write(self, ended_at: float, report: dict[str, Any]) -> None:
        """Write ``<call id>.wav`` and ``<call id>.json`` (blocking: run it off the event loop).
        ``report`` is :meth:`report`'s; its ``recording`` becomes the WAV's entry (``file``,
        ``sample_rate``, ``channels``, ``duration_s``) once the WAV is written. Raises OSError for
        the report; a WAV that fails is logged and left out."""
        try:
            seconds = self.audio.finish(self.directory / f"{self.call_id}.wav", ended_at)
        except OSError:
            log.exception("%s: the recording could not be written", self.call_id)
        else:
            report["recording"] = {
                "file": f"{self.call_id}.wav",
                "format": "wav",
                "sample_rate": RATE,
                "channels": ["caller", "assistant"],
                "duration_s": round(seconds, 3),
            }
        final = self.directory / f"{self.call_id}.json"
        partial = self.directory / f"{PARTIAL_PREFIX}{self.call_id}.json"
        try:
            partial.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(partial, final)
        finally:
            partial.unlink(missing_ok=True)

    def discard(self) -> None:
        """Drop the work files (blocking)."""
        self.audio.discard()


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


def prune(policy: RecordPolicy, instance: Optional[str] = None, now: Optional[float] = None) -> int:
    """Apply the retention to ``policy.directory``: delete the calls (``<id>.wav`` and
    ``<id>.json`` together) older than ``retention_days`` (by the newest file's mtime), then the
    oldest beyond ``max_calls``; with ``instance`` (at start), also this instance's work files
    left by a process that died mid-call. Returns the number of calls deleted; errors are logged.
    Blocking."""
    directory = policy.directory
    if directory is None:
        return 0
    now = time.time() if now is None else now
    calls: dict[str, float] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError as exc:
        log.error("record directory %s: %s", directory, exc)
        return 0
    for entry in entries:
        name = entry.name
        if name.startswith(PARTIAL_PREFIX):
            if instance is not None and f"_{instance}_" in name:
                _remove(Path(entry.path))
            continue
        stem, _, ext = name.rpartition(".")
        if ext in ("wav", "json") and stem:
            try:
                if entry.is_file():
                    calls[stem] = max(calls.get(stem, 0.0), entry.stat().st_mtime)
            except OSError:
                continue  # deleted meanwhile (another call's prune)
    doomed = set()
    if policy.retention_days > 0:
        cutoff = now - policy.retention_days * 86400
        doomed |= {stem for stem, mtime in calls.items() if mtime < cutoff}
    if policy.max_calls > 0:
        kept = sorted((stem for stem in calls if stem not in doomed), key=lambda stem: calls[stem], reverse=True)
        doomed |= set(kept[policy.max_calls :])
    for stem in doomed:
        for ext in ("wav", "json"):
            _remove(directory / f"{stem}.{ext}")
    if doomed:
        log.info("record retention: deleted %d call(s) from %s", len(doomed), directory)
    return len(doomed)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not delete %s: %s", path, exc)


def prepare_directory(policy: RecordPolicy, instance: str) -> None:
    """At start: make the record directory (and its parents) and apply the retention. Raises
    OSError when it cannot be made. Blocking."""
    if policy.directory is None:
        return
    policy.directory.mkdir(parents=True, exist_ok=True)
    prune(policy, instance)
