"""RealtimeSession: the OpenAI Realtime protocol of one call, with no sockets and no audio.

Two dispatchers, each an explicit table: client events in (JSON text from the ``oai-events`` data
channel; ``_client_handlers``, by event name) and pipeline events out (from the unit's stages;
``_pipeline_handlers``, by event class). Each handler turns its event into server events. What the
session keeps lives beside it: the conversation (``conversation``), the responses
(``response_tracker``), the idle timer (``idle_timer``), the settings and their GA/beta views
(``session_config``, ``session_settings``, ``session_views``). It drives the pipeline only through ``PipelineControl``
(``control``) and keeps time only through the ``call_later`` and ``clock`` it is given.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from typing import Any, Optional

from gateway.pipeline import events as pe
from gateway.pipeline.latency import STAGES
from gateway.realtime.client_messages import (
    MAX_CLIENT_MESSAGE_BYTES,
    client_event_id,
    client_event_type,
    decode_client_message,
)
from gateway.realtime.control import PipelineControl
from gateway.realtime.conversation import Conversation, PromptSpec
from gateway.realtime.events import new_id
from gateway.realtime.idle_timer import CallLater, IdleTimer
from gateway.realtime.items import ClientError, has_words
from gateway.realtime.limits import SessionLimits
from gateway.realtime.response_requests import cancel_response, create_response, stop_reply_of_item
from gateway.realtime.response_tracker import ResponseTracker
from gateway.realtime.sender import EventSender
from gateway.realtime.session_settings import SessionSettings
from gateway.realtime.session_update import SessionUpdate
from gateway.realtime.session_views import describe_session, local_voice, transcription_session_view

__all__ = ["MAX_CLIENT_MESSAGE_BYTES", "RealtimeSession"]

log = logging.getLogger(__name__)

ClientHandler = Callable[[dict, Optional[str]], None]  # (event, its event_id)


class RealtimeSession:
    """Protocol state of one call. ``send(event)`` must not block; it is called on the event loop.

    ``local_models``: the ``llm``, ``stt`` and ``voice`` names really used; ``history_turns``:
    user/assistant pairs the prompt keeps; ``max_call_s``: the call's longest duration (s; shown as
    ``expires_at``, None for no limit). ``call_later(delay_s, callback)`` schedules the idle timeout
    (default: the running event loop's) and must return a handle with ``cancel()``; ``clock()`` is
    monotonic seconds. Tests pass fakes. ``limits`` bound what the session may send to the shared
    model (``SessionLimits.from_config(config)``; default: ``SessionLimits()``).
    """

    max_message_bytes = MAX_CLIENT_MESSAGE_BYTES  # larger client messages get an error

    def __init__(
        self,
        control: PipelineControl,
        send: Callable[[dict], None],
        *,
        local_models: dict[str, str],
        history_turns: int = 6,
        call_later: Optional[CallLater] = None,
        clock: Callable[[], float] = time.monotonic,
        max_call_s: Optional[float] = None,
        limits: Optional[SessionLimits] = None,
        extensions: frozenset[str] = frozenset(),
        recording: Optional[Callable[[bool], None]] = None,
    ) -> None:
        self.control = control
        # Turns the call's recording on or off (the gateway extension ``"recording"`` of a session
        # config); raises ClientError when it cannot. None: this gateway records nothing.
        self._recording = recording
        self._sender = EventSender(send, extensions)
        self.id = new_id("sess")
        self.conversation_id = new_id("conv")
        self._local = local_models
        self._expires_at = int(time.time() + max_call_s) if max_call_s else None
        self.settings = SessionSettings.from_pipeline(control.current_settings())
        self.limits = limits or SessionLimits()
        self.conversation = Conversation(self._sender, history_turns, self.limits)
        self.idle = IdleTimer(
            wanted=self._idle_wanted,
            timeout_ms=lambda: self.settings.call.turn.idle_timeout_ms,
            keep_alive=self._keep_alive,
            on_timeout=self._on_idle_timeout,
            call_later=call_later,
            clock=clock,
        )
        self.responses = ResponseTracker(
            self._sender,
            control,
            self.conversation,
            self.settings,
            conversation_id=self.conversation_id,
            voice=local_voice(local_models),
            session_id=self.id,
            on_busy=self.idle.disarm,
            on_settled=self._on_response_settled,
        )
        # A caller's turn of words transcribed while the client's out-of-band response ran: answered after it.
        self._turn_waits: Optional[pe.TranscriptionCompleted] = None
        self._speech_item: Optional[str] = None  # item id of the caller turn being spoken
        self._speaking = False
        self._pending_commits: collections.deque[Optional[str]] = collections.deque()  # client event ids
        self._client_handlers: dict[str, ClientHandler] = {
            "session.update": self._on_session_update,
            "input_audio_buffer.append": self._on_input_audio_buffer_append,
            "input_audio_buffer.commit": self._on_input_audio_buffer_commit,
            "input_audio_buffer.clear": self._on_input_audio_buffer_clear,
            "output_audio_buffer.clear": self._on_output_audio_buffer_clear,
            "conversation.item.create": self._on_conversation_item_create,
            "conversation.item.retrieve": self._on_conversation_item_retrieve,
            "conversation.item.truncate": self._on_conversation_item_truncate,
            "conversation.item.delete": self._on_conversation_item_delete,
            "response.create": self._on_response_create,
            "response.cancel": self._on_response_cancel,
            "transcription_session.update": self._on_transcription_session_update,
        }
        self._pipeline_handlers: dict[type[pe.PipelineEvent], Callable[[Any], None]] = {
            pe.SpeechStarted: self._on_speech_started,
            pe.SpeechStopped: self._on_speech_stopped,
            pe.InputCommitted: self._on_input_committed,
            pe.InputRejected: self._on_input_rejected,
            pe.TranscriptDrafted: self._on_transcript_drafted,
            pe.SpeechResumed: self._on_speech_resumed,
            pe.TranscriptionCompleted: self._on_transcription_completed,
            pe.TranscriptionFailed: self._on_transcription_failed,
            pe.ResponseTextDelta: self.responses.on_text_delta,
            pe.ResponseAudioTranscriptDelta: self.responses.on_audio_transcript_delta,
            pe.ResponseFinished: self.responses.on_finished,
            pe.ResponseInterrupted: self.responses.on_interrupted,
            pe.PlaybackStarted: self.responses.on_playback_started,
            pe.PlaybackStopped: self.responses.on_playback_stopped,
            pe.TurnLatencyMeasured: self._on_turn_latency_measured,
            pe.BargeInDecided: self._on_barge_in_decided,
            pe.StageFailed: self._on_stage_failed,
        }

    # ------------------------------------------------------------------ state and output
    @property
    def items(self) -> list[dict]:
        """The conversation's items, in order."""
        return self.conversation.items

    @property
    def beta(self) -> bool:
        """True once the client spoke the beta (flat) ``session.update``: beta event names."""
        return self._sender.beta

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran: nothing more is sent or asked of the pipeline."""
        return self._sender.closed

    def send(self, event_type: str, **fields: Any) -> None:
        """Send a server event by its GA name (renamed or dropped for a beta session)."""
        self._sender.send(event_type, **fields)

    def send_error(
        self,
        message: str,
        code: Optional[str] = None,
        param: Optional[str] = None,
        event_id: Optional[str] = None,
        error_type: str = "invalid_request_error",
    ) -> None:
        """Send an ``error``; ``event_id`` is the client event that caused it, if any."""
        self._sender.error(message, code=code, param=param, event_id=event_id, error_type=error_type)

    def start(self) -> None:
        """Send ``session.created`` (when the data channel opens)."""
        self.idle.restart_stream()
        self.send("session.created", session=self.describe())
        self.control.apply_settings(self.settings.call)  # the LLM may read the prompt ahead now
        self.idle.maybe_arm()

    def close(self, reason: Optional[str] = None, message: Optional[str] = None) -> None:
        """Say why the call ends (an ``error`` with code ``reason``) and send nothing more."""
        if reason and not self.closed:
            self.send_error(message or f"session closed: {reason}", code=reason, error_type="session_closed")
        self.idle.disarm()
        self._sender.closed = True

    def describe(self) -> dict:
        """The effective session, in the shape the client speaks (``session_views``)."""
        return describe_session(
            self.settings, session_id=self.id, beta=self.beta, local_models=self._local, expires_at=self._expires_at
        )

    def apply_session_update(self, session: Any) -> None:
        """Parse a session config object against this session's limits and apply it
        (:meth:`apply_update`). Raises ClientError when it is invalid; nothing is applied then."""
        self.apply_update(SessionUpdate.parse(session, self.limits, beta_default=self.beta))

    def apply_update(self, update: SessionUpdate) -> None:
        """Apply a parsed session config (a ``session.update``'s, or one sent with an offer or an
        ephemeral key, parsed at the edge) exactly as a ``session.update`` does,
        ``session.updated`` included. Raises ClientError (``invalid_value``, ``param``
        ``session.tool_choice``) when it would leave a ``tool_choice`` naming no tool, and
        (``unknown_parameter``) for a field of a response, such as ``instructions``, in the update
        of a transcription session; nothing is applied then. Ignored once the session is closed."""
        if self._apply(update):
            self.send("session.updated", session=self.describe())

    def _apply(self, update: SessionUpdate) -> bool:
        """:meth:`apply_update` without its answer: True once applied, False when closed."""
        if self.closed:
            return False
        changes = update.changes
        self.settings.check_type(changes)
        if self.settings.transcription_only or changes.get("session_type") == "transcription":
            update.check_transcription()
        self.settings.check_tools(changes)
        if "recording" in changes:  # the last check: once it said yes, the rest applies
            self._switch_recording(changes["recording"])
        # Validated as a whole above: from here on nothing can fail half-way.
        self._sender.beta = update.beta(self.beta)
        self.settings.apply(changes)
        self.control.apply_settings(self.settings.call)
        if "turn_detection" in changes:
            self.idle.disarm()
            self.idle.maybe_arm()
        return True

    def _switch_recording(self, on: bool) -> None:
        if self._recording is None:
            raise ClientError(
                "Recording is not available on this gateway: its operator has not set a record directory.",
                "recording_unavailable",
                "session.recording",
            )
        self._recording(on)

    def answers_by_itself(self) -> bool:
        """True when a finished user turn is answered without a ``response.create``: turn
        detection on (not manual) with ``create_response``."""
        turn = self.settings.call.turn
        return turn.mode != "manual" and turn.create_response

    def add_user_text(self, text: str) -> None:
        """A user turn the gateway adds (a DTMF key press put into words): a ``message`` item with
        ``input_text``, answered as a spoken turn would be when no response is going on."""
        if self.closed:
            return
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        self.conversation.create(item, None)
        if self.answers_by_itself() and self.responses.active() is None:
            self.responses.start(PromptSpec(), self.settings.audio)

    # ------------------------------------------------------------------ client events in
    def handle_client_message(self, raw: str | bytes) -> None:
        """One data-channel message. Every problem becomes an ``error`` event; the call goes on.
        Once the session is closed, messages are ignored: the unit may already serve another call."""
        if self.closed:
            return
        try:
            event = decode_client_message(raw, self.max_message_bytes)
        except ClientError as exc:
            self.send_error(str(exc), code=exc.code, param=exc.param, event_id=exc.event_id)
            return
        event_id = client_event_id(event)
        try:
            event_type = client_event_type(event)
        except ClientError as exc:
            self.send_error(str(exc), code=exc.code, param=exc.param, event_id=event_id)
            return
        try:
            self._client_handlers[event_type](event, event_id)
        except ClientError as exc:
            self.send_error(str(exc), code=exc.code, param=exc.param, event_id=event_id)
        except Exception:  # a bug must cost this event, not the call
            log.exception("client event %s failed", event_type)
            self.send_error(
                f"The server failed to handle '{event_type}'.",
                code="server_error",
                event_id=event_id,
                error_type="server_error",
            )

    def _on_session_update(self, event: dict, event_id: Optional[str]) -> None:
        self.apply_session_update(event.get("session"))  # parse_update checks that it is an object

    def _on_transcription_session_update(self, event: dict, event_id: Optional[str]) -> None:
        """``transcription_session.update`` (OpenAI's beta transcription session; the openai SDK's
        ``connection.transcription_session.update``): its flat session object (``input_audio_format``,
        ``input_audio_transcription``, ``turn_detection``, ``input_audio_noise_reduction``,
        ``include``) applied as a ``session.update`` that makes this a transcription session, in
        the dialect the session already speaks; answered ``transcription_session.updated``."""
        update = SessionUpdate.parse(event.get("session"), self.limits, beta_default=True).as_transcription()
        if self._apply(update):
            view = transcription_session_view(self.settings, session_id=self.id, local_models=self._local)
            self.send("transcription_session.updated", session=view)

    def _on_input_audio_buffer_append(self, event: dict, event_id: Optional[str]) -> None:
        raise ClientError(
            "input_audio_buffer.append is not supported over WebRTC: send audio on the media track.",
            "unsupported_event",
            "type",
        )

    def _on_input_audio_buffer_commit(self, event: dict, event_id: Optional[str]) -> None:
        # The VAD thread answers with InputCommitted or InputRejected; an error echoes this event id.
        self._pending_commits.append(event_id)
        self.control.commit_input()

    def _on_input_audio_buffer_clear(self, event: dict, event_id: Optional[str]) -> None:
        self.control.clear_input()
        self._speech_item = None
        self._speaking = False
        self.send("input_audio_buffer.cleared")

    def _on_output_audio_buffer_clear(self, event: dict, event_id: Optional[str]) -> None:
        # Reply audio cannot be dropped while its response goes on generating more, so clearing
        # the buffer also cancels a response in progress (as barge-in does).
        self.responses.interrupted(self.control.interrupt(), reason="client_cancelled")

    def _on_conversation_item_create(self, event: dict, event_id: Optional[str]) -> None:
        self.conversation.create(event.get("item"), event.get("previous_item_id"))

    def _on_conversation_item_retrieve(self, event: dict, event_id: Optional[str]) -> None:
        self.conversation.retrieve(event.get("item_id"))

    def _on_conversation_item_truncate(self, event: dict, event_id: Optional[str]) -> None:
        def stop(item_id: str) -> None:  # the reply still going on with the item stops there
            stop_reply_of_item(self.responses, self.control, item_id)

        self.conversation.truncate(event.get("item_id"), event.get("content_index", 0), event.get("audio_end_ms"), stop)

    def _on_conversation_item_delete(self, event: dict, event_id: Optional[str]) -> None:
        # The item of a reply still generating or playing: the reply stops first (cancelled,
        # client_cancelled, its audio cleared), as for a truncate; no reply goes on into an item
        # that is gone. An unknown item is an error, and the reply goes on.
        item_id: str = self.conversation.items[self.conversation.require(event.get("item_id"))]["id"]
        stop_reply_of_item(self.responses, self.control, item_id)
        self.conversation.delete(item_id)

    def _on_response_create(self, event: dict, event_id: Optional[str]) -> None:
        create_response(self.responses, event.get("response"), self.settings, self.conversation)

    def _on_response_cancel(self, event: dict, event_id: Optional[str]) -> None:
        cancel_response(self.responses, self.control, event.get("response_id"))

    # ------------------------------------------------------------------ pipeline events out
    def on_pipeline_event(self, event: pe.PipelineEvent) -> None:
        """Translate one pipeline event into server events (on the event loop)."""
        if self.closed:
            return
        handler = self._pipeline_handlers.get(type(event))
        if handler is None:
            log.warning("no handler for pipeline event %s", type(event).__name__)
            return
        handler(event)

    def _on_speech_started(self, event: pe.SpeechStarted) -> None:
        missed = self.responses.missed_start(event.replies_seen)
        if missed is not None:  # asked just after the unit's interrupt: cut it as the start should have
            self.responses.cancel(missed, reason="turn_detected")
        self._speech_item = new_id("item")
        self._speaking = True
        self.idle.disarm()
        # The VAD reports a start once min_speech_ms of speech is heard.
        self.idle.anchor(event.audio_start_ms + self.settings.call.turn.min_speech_ms)
        self.send("input_audio_buffer.speech_started", audio_start_ms=event.audio_start_ms, item_id=self._speech_item)

    def _on_speech_stopped(self, event: pe.SpeechStopped) -> None:
        # The VAD reports a stop after silence_duration_ms of silence.
        self.idle.anchor(event.audio_end_ms + self.settings.call.turn.silence_duration_ms)
        self.send(
            "input_audio_buffer.speech_stopped",
            audio_end_ms=event.audio_end_ms,
            item_id=self._speech_item or new_id("item"),
        )

    def _on_input_committed(self, event: pe.InputCommitted) -> None:
        if self._pending_commits:
            self._pending_commits.popleft()
        item_id = self._speech_item or new_id("item")
        self._speech_item = None
        self._speaking = False
        self.idle.disarm()
        self.conversation.commit_audio(item_id, event.audio_ms)

    def _on_input_rejected(self, event: pe.InputRejected) -> None:
        event_id = None
        if event.code.startswith("input_audio_buffer_commit") and self._pending_commits:
            event_id = self._pending_commits.popleft()
        self.send_error(event.message, code=event.code, event_id=event_id)

    def _on_transcript_drafted(self, event: pe.TranscriptDrafted) -> None:
        # Only when this turn's end would start a response at once. (STT keeps order: a turn still
        # awaiting its transcript now is the one this draft is of, committed during the pause.)
        # A draft while the caller speaks may have no words yet (the turn's start: the prompt up to them).
        words = has_words(event.transcript) or event.speaking
        if self.responses.active() is None and self.answers_by_itself() and words:
            self.responses.read_ahead(event.transcript, reply=not event.speaking)

    def _on_speech_resumed(self, event: pe.SpeechResumed) -> None:
        # The caller spoke on after a pause: the same turn goes on, so no client event (OpenAI's
        # speech_started/stopped frame the whole turn). The unit has discarded any reply started
        # from the draft at that pause.
        pass

    def _on_transcription_completed(self, event: pe.TranscriptionCompleted) -> None:
        item = self.conversation.transcribed(event.transcript)
        active = self.responses.active()
        stale = self.responses.missed_turn(event.transcript) if item is not None else None
        if active is not None and stale is None:
            self.responses.launch_when_ready()  # a response waiting for this transcript goes now
            if item is not None and not active.conversation:  # the client's own, out of band: not
                self._turn_waits = event  # the turn's to cut (interrupt_response), it is answered after
            return
        if stale is not None:  # cut it as the turn's start should have, and answer the turn
            self.responses.cancel(stale, reason="turn_detected")
        if item is not None:
            self._answer_turn(event)
        else:
            self.idle.maybe_arm()

    def _answer_turn(self, event: pe.TranscriptionCompleted) -> None:
        # A caller who is speaking again, or whose next turn is still being transcribed, has not
        # finished: answer once, after the last of their turns (a pause mid-sentence splits a turn).
        # A last turn with no words (a click or a breath after the sentence, written as "" or ".")
        # answers the words held back for it.
        caller_continues = self._speaking or self.conversation.awaiting_transcript
        words = has_words(event.transcript) or self.conversation.caller_unanswered()
        if self.answers_by_itself() and words and not caller_continues:
            self.responses.start(PromptSpec(), self.settings.audio, latency=event.latency)
        else:
            self.idle.maybe_arm()

    def _on_response_settled(self) -> None:
        # A response ended or its audio stopped: a turn transcribed while an out-of-band one ran is answered now.
        waiting = self._turn_waits
        if waiting is not None and self.responses.active() is None:
            self._turn_waits = None
            self._answer_turn(waiting)
        else:
            self.idle.maybe_arm()

    def _on_transcription_failed(self, event: pe.TranscriptionFailed) -> None:
        self.conversation.transcription_failed(event.message)
        self.responses.launch_when_ready()
        self.idle.maybe_arm()

    def _on_turn_latency_measured(self, event: pe.TurnLatencyMeasured) -> None:
        response = self.responses.of_generation(event.generation)
        # Gateway extension: per-turn latency, in ms, for the demo page and benchmarks; ``stages``
        # names the keys of ``latency_ms`` in order, with a label for each; ``detail_ms`` where the
        # time went (waits for shared models apart from their compute: ``TurnLatency.waits_ms``).
        self.send(
            "gateway.latency",
            response_id=response.id if response else None,
            latency_ms=event.latency_ms,
            detail_ms=event.detail_ms,
            stages=[{"name": key, "label": label} for key, label in STAGES],
        )

    def _on_barge_in_decided(self, event: pe.BargeInDecided) -> None:
        # Gateway extension: how speech under the reply's audio was judged ("resumed": it was a
        # backchannel or a noise, no turn; "interrupted": the usual speech_started and cancel came).
        playing = self.responses.playing()
        self.send(
            "gateway.barge_in",
            decision=event.decision,
            transcript=event.transcript,
            audio_start_ms=event.audio_start_ms,
            decided_ms=event.decided_ms,
            response_id=playing.id if playing is not None else None,
        )

    def _on_stage_failed(self, event: pe.StageFailed) -> None:
        message = f"The {event.stage} stage failed; the server's log has the details."  # not the text: URLs, bodies
        self.send_error(message, code=f"{event.stage}_failed", error_type="server_error")
        if event.stage == "stt":
            self._on_transcription_failed(pe.TranscriptionFailed(event.call_id, message=message))
        if event.generation is not None:
            self.responses.fail(event.generation, message)

    # ------------------------------------------------------------------ idle timeout
    def _idle_wanted(self) -> bool:
        """The caller's turn, with nothing said or said back: when ``idle_timeout_ms`` runs. Not
        while a reply's audio is queued and not yet playing (``sounding``: done generating, its
        first frame not out, e.g. a SIP call on hold): the caller has not heard it yet."""
        turn = self.settings.call.turn
        return (
            not self.closed
            and turn.mode == "server_vad"
            and bool(turn.idle_timeout_ms)
            and not self._speaking
            and self.responses.active() is None
            and self.responses.sounding() is None
        )

    def _keep_alive(self) -> None:
        if not self.closed:  # a closed session's unit may already serve the next caller
            self.control.keep_alive()

    def _on_idle_timeout(self, start_ms: int, end_ms: int) -> None:
        """``idle_timeout_ms`` of silence: commit the silent audio as a user turn and answer it."""
        item_id = new_id("item")
        self.send("input_audio_buffer.timeout_triggered", audio_start_ms=start_ms, audio_end_ms=end_ms, item_id=item_id)
        seconds = round((end_ms - start_ms) / 1000, 3)
        self.conversation.commit_silence(item_id, seconds)
        if self.settings.call.turn.create_response:
            note = f"(The caller has said nothing for {seconds:g} seconds.)"
            self.responses.start(PromptSpec(note=note), self.settings.audio)
