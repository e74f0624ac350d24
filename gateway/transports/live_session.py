"""One caller's live Realtime session, whatever its transport: :class:`LiveSession`, made by
``Door.open`` (``gateway.transports.door``).

- events in and out: every server event to the sideband listeners and the leg, pipeline events to
  the Realtime session (a spoken response ends once the leg has sent its audio);
- the client-event rate (:meth:`LiveSession.inbox`: a flood gets one ``rate_limit_exceeded``), the
  DTMF key press -> ``input_audio_buffer.dtmf_event_received`` -> barge-in / user item -> response
  (:meth:`LiveSession.key_press`), the idle and maximum-duration watchdogs (:meth:`LiveSession.watch`);
- one hang-up sequence (:meth:`LiveSession.hangup`): tell the client why, stop the reply audio,
  release the unit (it quarantine-drains), cancel the session's tasks, close the transport, forget
  the session; the hooks feed the metrics, labelled by transport;
- the call's recording and report when the operator allows it and the session asks (or the
  operator records every call): :meth:`LiveSession.set_recording`, written at the end of the
  hang-up sequence, whatever ended the call (``gateway.transports.call_record``).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Coroutine
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.pipeline import events as pe
from gateway.pool.end_reason import EndReason
from gateway.pool.lease import UnitLease
from gateway.pool.watchdog import watch_session
from gateway.realtime.client_messages import RATE_LIMIT_CODE, RATE_LIMIT_TYPE, ClientEventRate, RateVerdict
from gateway.realtime.items import ClientError
from gateway.realtime.session import RealtimeSession
from gateway.transports.call_record import CallRecord, RecordPolicy, disk_refusal, prune
from gateway.transports.record_usage import RecordUsage
from gateway.transports.transport import ServerEvent, Transport, TransportKind

log = logging.getLogger(__name__)

# Key presses a session remembers (``LiveSession.key_presses``), newest last.
KEY_PRESSES_KEPT = 64
KEY_PRESS_TEXT = "I pressed {} on my keypad."  # a key press put into words for the LLM (dtmf_to_llm)
HIDDEN_DIGIT = "*"  # a key press as logs and call reports show it, unless record_dtmf_digits
_KEY_PRESS_TEXT_RE = re.compile(re.escape(KEY_PRESS_TEXT).replace(re.escape("{}"), "."))


class LiveSession:
    """One caller's Realtime session, whatever its transport; made by :meth:`Door.open`.

    ``id``, ``kind``, ``lease`` (the claimed unit), ``realtime`` (the protocol session),
    ``transport`` (the leg), ``started_at`` (monotonic s), ``end_reason`` (None while live),
    ``ended`` (set once it ended: its recording and report, if any, are written by then),
    ``key_presses`` (DTMF digits, newest last), ``event_listeners`` (sideband sockets: each gets
    every server event), ``sidebands`` (sideband sockets attached or being attached, held to
    ``max_sidebands_per_call`` by the sideband route) and ``record`` (the call's recording; None:
    not recorded).
    """

    def __init__(
        self,
        kind: TransportKind,
        session_id: str,
        lease: UnitLease,
        config: GatewayConfig,
        record_usage: RecordUsage,
    ) -> None:
        self.kind = kind
        self.id = session_id
        self.lease = lease
        self.config = config
        self.started_at = time.monotonic()
        self.end_reason: Optional[EndReason] = None
        self.ended = asyncio.Event()
        self.key_presses: list[str] = []
        self.event_listeners: list[Callable[[ServerEvent], None]] = []
        self.sidebands = 0
        self.transport: Optional[Transport] = None
        self.record_policy = RecordPolicy.from_config(config)
        # The recordings' size (the door's, shared by its sessions), measured off the event loop.
        self.record_usage = record_usage
        self.record: Optional[CallRecord] = None
        self.realtime: RealtimeSession  # set by Door.open, before anyone sees the session
        self.on_end: Callable[[LiveSession], None] = lambda session: None
        self.on_server_event: Callable[[ServerEvent], None] = lambda event: None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._hangup_task: Optional[asyncio.Future[None]] = None

    # ----- events in and out -----
    def send(self, event: ServerEvent) -> None:
        """A server event of the session: to each sideband listener, then to the transport."""
        for listener in list(self.event_listeners):
            listener(event)
        if self.transport is not None:
            self.on_server_event(event)
            self.transport.send_event(event)

    def pipeline_event(self, event: pe.PipelineEvent) -> None:
        """A pipeline event of the session's unit: to the Realtime session; a spoken response's end
        once the transport has sent its audio."""
        if self.record is not None and isinstance(event, pe.TurnLatencyMeasured):
            response = self.realtime.responses.of_generation(event.generation)
            self.record.turn_latency(response.id if response else None, event.latency_ms)
        if isinstance(event, pe.ResponseFinished) and event.audio and self.transport is not None:
            self.transport.when_audio_sent(event.generation, lambda: self.realtime.on_pipeline_event(event))
        else:
            self.realtime.on_pipeline_event(event)

    def inbox(self, refuse_bytes: Optional[Callable[[bytes], None]] = None) -> Callable[[str | bytes], None]:
        """A receiver of client messages for one inbound channel (a data channel, a WebSocket, a
        sideband), with its own client-event rate (``ClientEventRate``): beyond it, messages are
        dropped unparsed and the client gets one ``rate_limit_exceeded`` error per flood. Messages
        that arrive once the session is ending are dropped (the unit may serve the next caller).
        ``refuse_bytes``: a channel that carries no binary messages (a WebSocket's binary frames)
        answers each one within the rate with it instead of parsing it, so a flood of them costs
        one error as a flood of events does."""
        rate = ClientEventRate()

        def receive(message: str | bytes) -> None:
            if self.end_reason is not None:
                return
            verdict = rate.admit()
            if verdict is RateVerdict.ACCEPT:
                if refuse_bytes is not None and isinstance(message, bytes):
                    refuse_bytes(message)
                else:
                    self.realtime.handle_client_message(message)
            elif verdict is RateVerdict.REFUSE_AND_TELL:
                log.warning("%s: client event flood, dropping events", self.id)
                self.realtime.send_error(rate.message(), code=RATE_LIMIT_CODE, error_type=RATE_LIMIT_TYPE)

        return receive

    def key_press(self, digit: str) -> None:
        """A DTMF key press (RFC 4733 over RTP, SIP INFO...): ``input_audio_buffer.dtmf_event_received``
        (``event`` the digit, ``received_at`` Unix seconds, as OpenAI's SIP calls report it), kept in
        :attr:`key_presses` and logged (as :data:`HIDDEN_DIGIT` unless ``record_dtmf_digits``: keys
        may spell a PIN or a card number); with ``dtmf_barge_in`` it interrupts the reply as speech
        does, with ``dtmf_to_llm`` it becomes a user text item that is answered."""
        if self.end_reason is not None:
            return
        self.key_presses = [*self.key_presses[-(KEY_PRESSES_KEPT - 1) :], digit]
        log.info("%s: key press %s", self.id, digit if self.config.record_dtmf_digits else HIDDEN_DIGIT)
        self.realtime.send("input_audio_buffer.dtmf_event_received", event=digit, received_at=int(time.time()))
        self.lease.touch()
        if self.config.dtmf_barge_in:
            interruption = self.lease.interrupt()
            if interruption is not None:
                self.realtime.on_pipeline_event(pe.ResponseInterrupted(self.id, interruption=interruption))
        if self.config.dtmf_to_llm:
            self.realtime.add_user_text(KEY_PRESS_TEXT.format(digit))

    # ----- recording -----
    def set_recording(self, on: bool) -> None:
        """Record the call (``on``), from the start of its timeline (``started_at``), or pause
        the recording (the pause becomes silence in the WAV). Raises ClientError (``param``
        ``session.recording``): ``recording_unavailable`` when the operator set no record
        directory or its disk bound is reached (``call_record.disk_refusal``, on the directory's
        last measure: ``record_usage``; a recording being made goes on), ``recording_required``
        to turn off a recording the operator makes of every call (``record_all_calls``),
        ``recording_failed`` when its files cannot be made."""
        policy = self.record_policy
        if policy.directory is None:
            raise ClientError(
                "Recording is not available on this gateway: its operator has not set a record directory.",
                "recording_unavailable",
                "session.recording",
            )
        if not on:
            if policy.all_calls:
                raise ClientError(
                    "This gateway records every call (its operator's setting); a session cannot turn it off.",
                    "recording_required",
                    "session.recording",
                )
            if self.record is not None:
                self.record.audio.paused = True
            return
        if self.record is None:
            refusal = disk_refusal(policy, self.record_usage.last)
            if refusal is not None:
                setting, measure = refusal
                log.warning("%s: recording not started (%s): %s", self.id, setting, measure)
                message = f"Recording is not available now: the gateway's recording storage is full (its {setting})."
                raise ClientError(message, "recording_unavailable", "session.recording")
            try:
                self.record = CallRecord(policy.directory, self.id, self.kind.value, self.started_at)
            except OSError as exc:
                log.error("%s: recording could not start: %s", self.id, exc)
                message = "Recording could not start on this gateway."
                raise ClientError(message, "recording_failed", "session.recording") from None
            self.lease.record(self.record.audio)
        self.record.audio.paused = False

    async def _write_record(self, ended_at: float, reason: EndReason, message: Optional[str]) -> None:
        """Write the call's WAV and report (in a worker thread), then apply the retention. The
        report's key presses (and the items that put them into words) show each digit as
        :data:`HIDDEN_DIGIT` unless ``record_dtmf_digits``."""
        record, self.record = self.record, None
        if record is None:
            return
        items, keys = self.realtime.items, self.key_presses
        if not self.config.record_dtmf_digits:
            items, keys = _hide_key_presses(items), [HIDDEN_DIGIT] * len(keys)
        report = record.report(
            ended_at=ended_at, end_reason=reason.value, message=message, items=items, key_presses=keys
        )
        try:
            await asyncio.to_thread(record.write, ended_at, report)
            await asyncio.to_thread(prune, self.record_policy)
        except Exception:
            log.exception("%s: the call's report could not be written", self.id)
        finally:  # what its files take, measured, replaces its estimate (RecordUsage.ended)
            await self.record_usage.measure(written=self.id)

    # ----- tasks and watchdogs -----
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task of this session (cancelled by :meth:`hangup`)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def watch(self) -> None:
        """The idle and maximum-duration watchdogs (``gateway.pool.watchdog``), until the end."""
        await watch_session(
            self.lease,
            self.config,
            started_at=self.started_at,
            ended=lambda: self.end_reason is not None,
            hangup=self.hangup,
        )

    # ----- the one hang-up sequence -----
    def hangup_soon(self, reason: EndReason, message: Optional[str] = None) -> None:
        """:meth:`hangup` from a synchronous callback (aiortc, media, socket events): scheduled on
        the event loop, at most once."""
        if self.end_reason is None and self._hangup_task is None:
            self._hangup_task = asyncio.ensure_future(self.hangup(reason, message))  # held: not GC'd mid-run

    async def hangup(self, reason: EndReason | str, message: Optional[str] = None) -> None:
        """End the session once: tell the client why in an ``error`` event with code ``reason`` and
        ``message`` (unless it left itself, :attr:`EndReason.client_left`), stop the reply audio,
        release the unit (quarantine-drain), cancel the session's tasks, close the transport, and
        forget the session (``on_end``, even if closing failed); a recorded call's WAV and report
        are written before ``ended`` is set. Raises ValueError for a ``reason`` that is no
        EndReason value."""
        if self.end_reason is not None:
            return
        reason = EndReason(reason)
        self.end_reason = reason
        if reason.client_left:
            self.realtime.close()  # nothing to tell it
        else:
            self.realtime.close(reason, message)
        if reason is not EndReason.CLIENT_HANGUP:
            log.info("%s session %s ended: %s", self.kind.value, self.id, reason)
        if self.transport is not None:
            self.transport.stop_audio()  # before the release: the next caller's audio is not this call's
        self.lease.release(reason)  # detaches the recording too
        ended_at = time.monotonic()
        if self.record is not None:  # counted against record_max_bytes from now, before it is written
            self.record_usage.ended(self.id, self.record.audio.wav_bytes(ended_at))
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        try:
            if self.transport is not None:
                await self.transport.close(reason, message)
        finally:
            try:
                await self._write_record(ended_at, reason, message)
            finally:  # even if cancelled while writing (the worker thread finishes the files)
                self.ended.set()
                self.on_end(self)


def _hide_key_presses(items: list[dict]) -> list[dict]:
    """``items`` with each user text that puts a key press into words (:data:`KEY_PRESS_TEXT`)
    showing :data:`HIDDEN_DIGIT` instead (copies; the other items as they are)."""
    hidden_text = KEY_PRESS_TEXT.format(HIDDEN_DIGIT)

    def hidden(part: Any) -> Any:
        spoken = isinstance(part, dict) and _KEY_PRESS_TEXT_RE.fullmatch(str(part.get("text")))
        return {**part, "text": hidden_text} if spoken else part

    shown = []
    for item in items:
        if item.get("role") == "user" and item.get("content"):
            item = {**item, "content": [hidden(part) for part in item["content"]]}
        shown.append(item)
    return shown
