"""The responses of one Realtime session, by generation: the active one, those still playing, the
finished ones, and the server events of their lifecycle.

Reference: the OpenAI Realtime API response lifecycle (``response.created``, ``response.output_item.added``,
``response.content_part.added``, deltas, then the ``*.done`` events ending with ``response.done``) and,
over WebRTC, ``output_audio_buffer.cleared``. A response gets its generation id (the pipeline's,
see CancelScope) only when it is handed to the pipeline, which waits for any caller turn still
being transcribed.

Function calls: a response that may call a tool announces its message item only when its first
words arrive (it may turn out to be a call instead). The calls the model made come whole with the
response's ``ResponseFinished`` (after all its words), and are reported once, ``completed``:
``response.output_item.added`` (a ``function_call`` item, ``arguments: ""``, in progress),
``conversation.item.added``, ``response.function_call_arguments.delta`` and ``.done``,
``response.output_item.done``, ``conversation.item.done``, before ``response.done``. A response
cancelled first (barge-in, ``response.cancel``) reports no call at all, so a client never sees,
and never runs, the call of a cancelled response; a call id is never reported twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from gateway.models.base import ChatMessage, FunctionTool, ToolCall
from gateway.pipeline import events as pe
from gateway.pipeline.events import Interruption
from gateway.pipeline.latency import TurnLatency
from gateway.realtime.control import PipelineControl
from gateway.realtime.conversation import Conversation, PromptSpec
from gateway.realtime.events import message_item, new_id, rate_limits, response_object, usage
from gateway.realtime.items import has_words
from gateway.realtime.sender import EventSender
from gateway.realtime.session_settings import SessionSettings
from gateway.realtime.tools import engine_tool_choice, function_call_item

log = logging.getLogger(__name__)

# ``status_details.reason`` of an ``incomplete`` response by the pipeline's finish reason. OpenAI's
# reasons are ``max_output_tokens`` and ``content_filter`` (openai-python's RealtimeResponseStatus:
# a Literal, which an SDK that validates events, e.g. openai-agents, rejects any other value of):
# a reply cut by the turn's compute budget (``budget``) is no token cap, so it has no reason.
INCOMPLETE_REASONS = {"length": "max_output_tokens"}
EMPTY_REPLY = "The model ended its reply without a word, twice (asked again with its end barred)."


@dataclass
class Response:
    """One response. ``item`` is its assistant message item (in the conversation unless
    out-of-band; ``opened`` once announced); ``text`` what was generated (or, once cut, heard);
    ``playing`` while its audio is heard. ``tools``/``tool_choice`` (the engine's string) are what
    it may call; ``calls`` the calls made, held until it completes; ``output`` the items announced.
    ``sounding`` from its first words' audio queued until that audio played out or was cut: queued
    audio may wait a moment before it plays (``playing``), and a newer response makes it stale."""

    id: str
    audio: bool
    item: dict
    prompt: PromptSpec
    conversation: bool = True  # False for out-of-band responses (``conversation: "none"``)
    metadata: Optional[dict] = None
    max_tokens: Optional[int] = None  # this response's own cap (response.max_output_tokens)
    latency: Optional[TurnLatency] = None
    generation: Optional[int] = None  # None until handed to the pipeline
    text: str = ""
    status: str = "in_progress"
    done: bool = False
    playing: bool = False
    sounding: bool = False
    tools: list[FunctionTool] = field(default_factory=list)
    tool_choice: str = "none"
    calls: list[ToolCall] = field(default_factory=list)
    output: list[dict] = field(default_factory=list)
    opened: bool = False
    stopped_by_item_edit: bool = False  # a truncate or delete of its item stopped it: the cancel after is no error

    @property
    def may_call(self) -> bool:
        """True when the model may answer with a function call instead of words."""
        return bool(self.tools) and self.tool_choice != "none"


class ResponseTracker:
    """Starts, hands to the pipeline, finishes and cancels the responses of one session.

    ``latest`` is the newest response (active until done); responses the pipeline may still report
    on (generating or playing) are kept by generation. ``voice`` is the voice really used and
    ``conversation_id`` the session's conversation, both as ``response`` objects show them.
    ``on_busy`` is called when a response starts or its audio starts playing (the idle timer must
    stop), ``on_settled`` once a response ended or its audio stopped or was cut (it may start).
    """

    def __init__(
        self,
        sender: EventSender,
        control: PipelineControl,
        conversation: Conversation,
        settings: SessionSettings,
        *,
        conversation_id: str,
        voice: str,
        session_id: str = "",
        on_busy: Callable[[], None] = lambda: None,
        on_settled: Callable[[], None] = lambda: None,
    ) -> None:
        self._sender = sender
        self._control = control
        self._conversation = conversation
        self._settings = settings
        self._conversation_id = conversation_id
        self._session_id = session_id
        self._voice = voice
        self._on_busy = on_busy
        self._on_settled = on_settled
        self.latest: Optional[Response] = None
        self._by_generation: dict[int, Response] = {}
        self._reported_calls: set[str] = set()  # call ids already reported in this session

    # ----- lookup -----
    def active(self) -> Optional[Response]:
        """The response in progress (not done), if any: a client may not create another."""
        return self.latest if self.latest is not None and not self.latest.done else None

    def missed_turn(self, transcript: str) -> Optional[Response]:
        """The active response if it answers without the caller's turn just transcribed, of words,
        whose start should have cut it, else None: it went to the pipeline before the turn was
        committed (:meth:`launch_when_ready` waits for every committed turn's transcript), so the
        start missed it (see :meth:`missed_start`)."""
        response = self._cuttable()
        return response if response is not None and has_words(transcript) else None

    def missed_start(self, seen: Optional[int]) -> Optional[Response]:
        """The active response if the caller's speech start, whose interrupt saw generations up to
        ``seen`` (``SpeechStarted.replies_seen``; None: unknown), should have cut it and did not: it was
        asked after the unit's interrupt ran and before the loop heard the start (a transcript and
        the next speech crossing on the event loop)."""
        response = self._cuttable()
        if response is None or response.generation is None or seen is None:
            return None
        return response if response.generation > seen else None

    def _cuttable(self) -> Optional[Response]:
        """The active response if a turn's start cuts it: in the pipeline, in the conversation,
        under server VAD with ``interrupt_response`` (OpenAI's: a VAD start interrupts "any ongoing
        response with output to the default conversation")."""
        response, turn = self.active(), self._settings.call.turn
        if response is None or response.generation is None or not response.conversation:
            return None
        return response if turn.mode == "server_vad" and turn.interrupt_response else None

    def of_generation(self, generation: int) -> Optional[Response]:
        """The response of pipeline generation ``generation``, done or not (None if forgotten)."""
        return self._by_generation.get(generation)

    def live(self, generation: int) -> Optional[Response]:
        """The response of ``generation`` if it is still generating."""
        response = self._by_generation.get(generation)
        return response if response is not None and not response.done else None

    def playing(self, response_id: Optional[str] = None) -> Optional[Response]:
        """A response whose audio is being heard (``response_id`` None: any)."""
        return next((r for r in self._by_generation.values() if r.playing and response_id in (None, r.id)), None)

    def sounding(self, response_id: Optional[str] = None) -> Optional[Response]:
        """A response whose audio is queued or being heard (``response_id`` None: any): done
        generating, its audio may not have started yet."""
        return next((r for r in self._by_generation.values() if r.sounding and response_id in (None, r.id)), None)

    def of_item(self, item_id: str) -> Optional[Response]:
        """The response whose message item is ``item_id`` while it generates or its audio is
        queued or heard, else None."""
        return next(
            (r for r in self._by_generation.values() if r.item["id"] == item_id and (not r.done or r.sounding)), None
        )

    # ----- lifecycle -----
    def start(
        self,
        spec: PromptSpec,
        audio: bool,
        *,
        latency: Optional[TurnLatency] = None,
        metadata: Optional[dict] = None,
        conversation: bool = True,
        max_tokens: Optional[int] = None,
        tools: Optional[list[FunctionTool]] = None,
        tool_choice: Optional[str] = None,
    ) -> Response:
        """Create a response (``response.created`` and, unless it may call a tool, its message item
        up to ``response.content_part.added``) and hand it to the pipeline as soon as it can be
        (:meth:`launch_when_ready`). ``tools``/``tool_choice`` (the engine's string, see ``tools``):
        None for the session's."""
        if tools is None:
            tools, tool_choice = list(self._settings.call.tools), self._settings.call.tool_choice
        item = message_item("assistant", [], status="in_progress")
        response = Response(
            new_id("resp"),
            audio,
            item,
            spec,
            conversation=conversation,
            metadata=metadata,
            max_tokens=max_tokens,
            latency=latency,
            tools=list(tools),
            tool_choice=tool_choice or engine_tool_choice("auto", tools),
        )
        self.latest = response
        self._on_busy()
        self._sender.send("response.created", response=self._body(response))
        if not response.may_call:
            self._open_message(response)
        self.launch_when_ready()
        return response

    def read_ahead(self, transcript: str, reply: bool = True) -> None:
        """The caller paused with ``transcript`` said so far: have the LLM read the prompt of the
        response :meth:`start` would make if the turn ends here (the session's tools and modality,
        the conversation with ``transcript`` as its newest user turn), or start that reply held
        (the preemptive reply; not when ``reply`` is False: a draft while the caller still speaks).
        A ``transcript`` with no words (the turn's start) reads the prompt up to the caller's words:
        an empty user message (its header is what later prompts share). Nothing is sent; it is
        used only if that response's prompt comes out the same."""
        call = self._settings.call
        draft = message_item("user", [{"type": "input_audio", "transcript": transcript}])
        messages = self._conversation.prompt(PromptSpec(extra=[draft]), call.instructions)
        if not has_words(transcript):
            messages.append(ChatMessage("user", ""))
        self._control.read_ahead(
            messages,
            max_tokens=None,
            tools=list(call.tools),
            tool_choice=call.tool_choice,
            audio=self._settings.audio,
            reply=reply,
        )

    def _open_message(self, response: Response) -> None:
        """Announce the response's message item (``response.output_item.added``,
        ``conversation.item.added``, ``response.content_part.added``), once."""
        if response.opened:
            return
        response.opened = True
        send, items, item, audio = self._sender.send, self._conversation, response.item, response.audio
        previous = items.insert(item) if response.conversation else None
        response.output.append(item)
        send("response.output_item.added", response_id=response.id, output_index=0, item=self._sender.view(item))
        if response.conversation:
            send("conversation.item.added", previous_item_id=previous, item=self._sender.view(item))
        item["content"] = [{"type": "output_audio", "transcript": ""} if audio else {"type": "output_text", "text": ""}]
        part = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        send(
            "response.content_part.added",
            response_id=response.id,
            item_id=item["id"],
            output_index=0,
            content_index=0,
            part=part,
        )

    def launch_when_ready(self) -> None:
        """Hand the active response to the pipeline once no committed turn awaits its transcript
        (the LLM only knows what the caller said through it)."""
        response = self.active()
        if response is None or response.generation is not None or self._conversation.awaiting_transcript:
            return
        if self.sounding() is not None:
            # A new generation makes the old reply's queued audio stale (playing or not yet): say it was cut.
            self.interrupted(self._control.interrupt(), reason="client_cancelled")
        messages = self._conversation.prompt(response.prompt, self._settings.call.instructions)
        response.generation = self._control.create_response(
            messages,
            audio=response.audio,
            max_tokens=response.max_tokens,
            latency=response.latency,
            tools=response.tools,
            tool_choice=response.tool_choice,
            turn_cuts=response.conversation,  # an out-of-band response is no caller's turn's to cut
        )
        # Pipeline events only concern responses still generating or sounding: forget the others.
        self._by_generation = {g: r for g, r in self._by_generation.items() if not r.done or r.sounding}
        self._by_generation[response.generation] = response

    def finish(
        self,
        response: Response,
        status: str,
        reason: Optional[str] = None,
        tokens: tuple[int, int, int] = (0, 0, 0),
        code: str = "response_failed",
    ) -> None:
        """End ``response`` with ``status`` (completed, incomplete, cancelled, failed): its ``*.done``
        events, ``response.done`` (``tokens``: its usage, output, input and cached input tokens) and
        ``rate_limits.updated``. ``reason``: see :func:`status_details` (``code``: a failure's error
        code). A second finish does nothing."""
        if response.done:
            return
        response.done = True
        response.status = status
        send, view = self._sender.send, self._sender.view
        if response.opened:
            self._close_message(response, status)
        if status == "completed":
            for call in response.calls:
                self._report_call(response, call)
        body = self._body(
            response,
            status=status,
            output=[view(item) for item in response.output],
            status_details=status_details(status, reason, code),
            usage=usage(*tokens),
        )
        send("response.done", response=body)
        send("rate_limits.updated", rate_limits=rate_limits(self._settings.call.max_tokens))
        self._on_settled()

    def _close_message(self, response: Response, status: str) -> None:
        """The ``*.done`` events of the response's message item, ending with ``conversation.item.done``."""
        send, view, item = self._sender.send, self._sender.view, response.item
        item["status"] = "completed" if status == "completed" else "incomplete"
        ids = dict(response_id=response.id, item_id=item["id"], output_index=0, content_index=0)
        if response.audio:
            item["content"][0]["transcript"] = response.text
            send("response.output_audio.done", **ids)
            send("response.output_audio_transcript.done", transcript=response.text, **ids)
            part = {"type": "audio", "transcript": response.text}
        else:
            item["content"][0]["text"] = response.text
            send("response.output_text.done", text=response.text, **ids)
            part = {"type": "text", "text": response.text}
        send("response.content_part.done", part=part, **ids)
        send("response.output_item.done", response_id=response.id, output_index=0, item=view(item))
        self._item_done(response, item)

    def _item_done(self, response: Response, item: dict) -> None:
        index = self._conversation.find(item["id"]) if response.conversation else None
        if index is not None:
            self._sender.send(
                "conversation.item.done",
                previous_item_id=self._conversation.previous_id(index),
                item=self._sender.view(item),
            )

    def _report_call(self, response: Response, call: ToolCall) -> None:
        """Announce one function call of a completed response, whole (see the module docstring)."""
        send, view = self._sender.send, self._sender.view
        item = function_call_item(call.call_id, call.name, "", status="in_progress")
        index = len(response.output)
        response.output.append(item)
        previous = self._conversation.insert(item) if response.conversation else None
        send("response.output_item.added", response_id=response.id, output_index=index, item=view(item))
        if response.conversation:
            send("conversation.item.added", previous_item_id=previous, item=view(item))
        ids = dict(response_id=response.id, item_id=item["id"], output_index=index, call_id=call.call_id)
        send("response.function_call_arguments.delta", **ids, delta=call.arguments)
        item["arguments"], item["status"] = call.arguments, "completed"
        send("response.function_call_arguments.done", **ids, name=call.name, arguments=call.arguments)
        send("response.output_item.done", response_id=response.id, output_index=index, item=view(item))
        self._item_done(response, item)

    def cancel(self, response: Response, reason: str) -> None:
        """``response.cancel`` of the active response: stop the pipeline's work on it, then finish it."""
        if response.generation is not None:
            self.interrupted(self._control.interrupt(), reason=reason)
        self.finish(response, "cancelled", reason=reason)

    def fail(self, generation: int, message: str) -> None:
        """A stage failed on ``generation``: if it is still generating, stop it and fail it."""
        response = self.live(generation)
        if response is not None:
            interruption = self._control.interrupt()
            if interruption is not None and interruption.generation == generation:
                self._cut(response, interruption)
            self.finish(response, "failed", reason=message)

    def interrupted(self, interruption: Optional[Interruption], reason: str) -> None:
        """A response was cancelled (barge-in, response.cancel, output_audio_buffer.clear): keep in
        the conversation only what the caller heard, say its audio was cleared, finish it."""
        if interruption is None:
            return
        response = self._by_generation.get(interruption.generation)
        if response is None:
            return
        self._cut(response, interruption)
        if not response.done:
            self.finish(response, "cancelled", reason=reason)
        self._on_settled()

    def _cut(self, response: Response, interruption: Interruption) -> None:
        """Its unplayed audio was dropped: keep only the words heard, ``output_audio_buffer.cleared``."""
        if not interruption.audio_cleared:
            return
        response.text = interruption.heard_text
        response.playing = response.sounding = False
        if response.item.get("content"):
            response.item["content"][0]["_audio_ms"] = interruption.played_ms
            if response.done:
                response.item["content"][0]["transcript"] = interruption.heard_text
        self._sender.send("output_audio_buffer.cleared", response_id=response.id)

    # ----- pipeline events of a response -----
    def on_text_delta(self, event: pe.ResponseTextDelta) -> None:
        """Text of a text-only response: ``response.output_text.delta``."""
        self._delta(event.generation, event.delta, "response.output_text.delta")

    def on_audio_transcript_delta(self, event: pe.ResponseAudioTranscriptDelta) -> None:
        """Words whose audio was just queued: ``response.output_audio_transcript.delta``."""
        response = self.live(event.generation)
        if response is not None:
            response.sounding = True
        self._delta(event.generation, event.delta, "response.output_audio_transcript.delta")

    def _delta(self, generation: int, delta: str, event_type: str) -> None:
        response = self.live(generation)
        if response is not None:
            self._open_message(response)
            response.text += delta
            self._sender.send(
                event_type,
                response_id=response.id,
                item_id=response.item["id"],
                output_index=0,
                content_index=0,
                delta=delta,
            )

    def on_finished(self, event: pe.ResponseFinished) -> None:
        """The pipeline is done with a response (its audio is queued): finish it, with its calls."""
        response = self.live(event.generation)
        if response is not None:
            response.text = response.text.strip() if response.audio else event.text
            if response.may_call:
                for call in event.tool_calls:
                    if call.call_id not in self._reported_calls:
                        self._reported_calls.add(call.call_id)
                        response.calls.append(call)
            used = (event.output_tokens, event.input_tokens, event.cached_tokens)
            if event.retried:
                outcome = "nothing again: failed" if event.finish_reason == "empty" else "it answered"
                log.warning(
                    "session %s response %s (item %s): the LLM ended the reply with no words; asked again: %s",
                    self._session_id,
                    response.id,
                    response.item["id"],
                    outcome,
                )
            if event.finish_reason == "empty":
                self.finish(response, "failed", reason=EMPTY_REPLY, tokens=used, code="empty_response")
            else:
                reason = INCOMPLETE_REASONS.get(event.finish_reason) if event.status == "incomplete" else None
                self.finish(response, event.status, reason=reason, tokens=used)

    def on_interrupted(self, event: pe.ResponseInterrupted) -> None:
        """Barge-in: the caller's speech cut the response (``turn_detected``)."""
        self.interrupted(event.interruption, reason="turn_detected")

    def on_playback_started(self, event: pe.PlaybackStarted) -> None:
        """The response's first audio frame left: ``output_audio_buffer.started``."""
        response = self._by_generation.get(event.generation)
        if response is not None and not response.playing:
            response.playing = response.sounding = True
            self._on_busy()
            self._sender.send("output_audio_buffer.started", response_id=response.id)

    def on_playback_stopped(self, event: pe.PlaybackStopped) -> None:
        """The response's audio played to the end: ``output_audio_buffer.stopped``."""
        response = self._by_generation.get(event.generation)
        if response is not None and response.playing:
            response.playing = response.sounding = False
            if response.item.get("content"):
                response.item["content"][0]["_audio_ms"] = event.played_ms
            self._sender.send("output_audio_buffer.stopped", response_id=response.id)
            self._on_settled()

    def _body(self, response: Response, **fields: Any) -> dict:
        return response_object(
            response.id,
            conversation_id=self._conversation_id if response.conversation else None,
            audio=response.audio,
            voice=self._voice,
            beta=self._sender.beta,
            max_output_tokens=response.max_tokens or self._settings.call.max_tokens,
            metadata=response.metadata,
            output_format=self._settings.output_format,
            **fields,
        )


def status_details(status: str, reason: Optional[str], code: str = "response_failed") -> Optional[dict]:
    """``response.status_details`` for a final ``status``: ``reason`` as the Realtime API words it
    (cancelled: ``turn_detected``/``client_cancelled``; incomplete: ``max_output_tokens``, or None
    for a cut that is none of OpenAI's reasons: no ``reason`` then, which its types allow), or for
    ``failed`` the error's message (``code``: its code)."""
    if status == "cancelled":
        return {"type": "cancelled", "reason": reason or "client_cancelled"}
    if status == "incomplete":
        return {"type": "incomplete", "reason": reason} if reason else {"type": "incomplete"}
    if status == "failed":
        return {"type": "failed", "error": {"type": "server_error", "code": code, "message": reason}}
    return None
