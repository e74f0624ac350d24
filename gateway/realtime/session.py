"""RealtimeSession: the OpenAI Realtime protocol of one call, with no sockets and no audio.

It takes client events (JSON text from the ``oai-events`` data channel) and pipeline events (from
the unit's stages), keeps the conversation, and sends server events through ``send``. It drives the
pipeline only through the small :class:`PipelineControl` interface.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from gateway.models.base import ChatMessage
from gateway.pipeline import events as pe
from gateway.pipeline.latency import TurnLatency
from gateway.realtime.events import (
    CLIENT_EVENTS,
    GA_ONLY,
    GA_TO_BETA,
    error_event,
    message_item,
    new_id,
    response_object,
    server_event,
)
from gateway.realtime.session_config import SessionConfigError, parse_update

log = logging.getLogger(__name__)

MAX_CLIENT_MESSAGE_BYTES = 256 * 1024
# OpenAI voice and model names that stock clients send; accepted and mapped to local ones.
OPENAI_VOICES = {"alloy", "ash", "ballad", "coral", "echo", "sage", "shimmer", "verse", "marin", "cedar"}


class PipelineControl(Protocol):
    """What the protocol layer may ask of the pipeline (implemented by PipelineUnit)."""

    session: Any  # SessionState: turn, instructions, speed, max_tokens, language

    def commit_input(self) -> None: ...

    def clear_input(self) -> None: ...

    def create_response(self, messages: list[ChatMessage], audio: bool = True, latency: Optional[TurnLatency] = None) -> int: ...

    def interrupt(self) -> Optional[pe.Interruption]: ...


@dataclass
class _Response:
    id: str
    generation: int
    audio: bool
    item: dict
    text: str = ""
    status: str = "in_progress"
    done: bool = False
    playing: bool = False
    metadata: Optional[dict] = None
    conversation: bool = True  # False for out-of-band responses (``conversation: "none"``)


@dataclass
class _Settings:
    instructions: str
    voice: str
    local_voice: str
    modalities: list[str] = field(default_factory=lambda: ["audio"])
    model: str = "gpt-realtime"
    transcription_model: str = "whisper-1"


class RealtimeSession:
    """Protocol state of one call. ``send(event)`` must not block; it is called on the event loop."""

    def __init__(
        self,
        control: PipelineControl,
        send: Callable[[dict], None],
        *,
        local_models: dict[str, str],
        history_turns: int = 6,
    ) -> None:
        self.control = control
        self._send_raw = send
        self.id = new_id("sess")
        self.beta = False
        self.items: list[dict] = []
        self._local = local_models
        self._history_turns = history_turns
        self.settings = _Settings(
            instructions=control.session.instructions,
            voice=local_models.get("voice", "joe"),
            local_voice=local_models.get("voice", "joe"),
        )
        self.response: Optional[_Response] = None  # the response being generated
        self._by_generation: dict[int, _Response] = {}
        self._speech_item: Optional[str] = None  # item id of the caller turn being spoken
        self._turn_latency: Optional[TurnLatency] = None
        self.closed = False

    # ------------------------------------------------------------------ output
    def send(self, event_type: str, **fields: Any) -> None:
        if self.closed:
            return
        if self.beta:
            if event_type in GA_ONLY:
                return
            event_type = GA_TO_BETA.get(event_type, event_type)
        self._send_raw(server_event(event_type, **fields))

    def send_error(self, message: str, code: str | None = None, param: str | None = None,
                   event_id: str | None = None, error_type: str = "invalid_request_error") -> None:
        if not self.closed:
            self._send_raw(error_event(message, code=code, param=param, event_id=event_id, error_type=error_type))

    def start(self) -> None:
        """Send ``session.created`` (when the data channel opens)."""
        self.send("session.created", session=self.describe())

    def close(self, reason: str | None = None, message: str | None = None) -> None:
        """Say why the call ends (an ``error`` with code ``reason``) and send nothing more."""
        if reason and not self.closed:
            self.send_error(message or f"session closed: {reason}", code=reason, error_type="session_closed")
        self.closed = True

    def describe(self) -> dict:
        """The effective session, in the shape the client speaks."""
        state = self.control.session
        turn = state.turn
        td: Optional[dict]
        if turn.mode == "manual":
            td = None
        else:
            td = {
                "type": turn.kind,
                "threshold": turn.threshold,
                "prefix_padding_ms": turn.prefix_padding_ms,
                "silence_duration_ms": turn.silence_duration_ms,
                "create_response": turn.create_response,
                "interrupt_response": turn.interrupt_response,
                "idle_timeout_ms": turn.idle_timeout_ms,
            }
            if turn.kind == "semantic_vad":
                td = {"type": "semantic_vad", "eagerness": turn.eagerness,
                      "create_response": turn.create_response, "interrupt_response": turn.interrupt_response}
        tokens = state.max_tokens
        if self.beta:
            return {
                "id": self.id,
                "object": "realtime.session",
                "model": self._local["llm"],
                "modalities": ["text", "audio"] if "audio" in self.settings.modalities else ["text"],
                "instructions": self.settings.instructions,
                "voice": self.settings.local_voice,
                "input_audio_format": "pcm16",
                "output_audio_format": "pcm16",
                "input_audio_transcription": {"model": self._local["stt"]},
                "turn_detection": td,
                "speed": state.speed,
                "max_response_output_tokens": tokens,
                "tools": [],
            }
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self._local["llm"],
            "output_modalities": list(self.settings.modalities),
            "instructions": self.settings.instructions,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": self._local["stt"], "language": state.language},
                    "noise_reduction": None,
                    "turn_detection": td,
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "voice": self.settings.local_voice,
                    "speed": state.speed,
                },
            },
            "max_output_tokens": tokens,
            "tools": [],
            "tool_choice": "auto",
        }

    # ------------------------------------------------------------------ client events
    def handle_client_message(self, raw: str | bytes) -> None:
        """One data-channel message. Every problem becomes an ``error`` event; the call goes on."""
        if isinstance(raw, bytes):
            if len(raw) > MAX_CLIENT_MESSAGE_BYTES:
                self.send_error(f"message too large ({len(raw)} bytes, limit {MAX_CLIENT_MESSAGE_BYTES})", code="message_too_large")
                return
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.send_error("messages must be UTF-8 JSON text", code="invalid_json")
                return
        if len(raw) > MAX_CLIENT_MESSAGE_BYTES:
            self.send_error(f"message too large ({len(raw)} bytes, limit {MAX_CLIENT_MESSAGE_BYTES})", code="message_too_large")
            return
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.send_error(f"invalid JSON: {exc.msg} at position {exc.pos}", code="invalid_json")
            return
        if not isinstance(event, dict):
            self.send_error("a client event must be a JSON object", code="invalid_event")
            return
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        event_type = event.get("type")
        if not isinstance(event_type, str):
            self.send_error("missing required parameter 'type'", code="missing_required_parameter", param="type", event_id=event_id)
            return
        if event_type not in CLIENT_EVENTS:
            self.send_error(f"Invalid value: '{event_type}' is not a supported client event type", code="invalid_value",
                            param="type", event_id=event_id)
            return
        handler = getattr(self, "_on_" + event_type.replace(".", "_"))
        try:
            handler(event, event_id)
        except _ClientError as exc:
            self.send_error(str(exc), code=exc.code, param=exc.param, event_id=event_id)

    def _on_session_update(self, event: dict, event_id: Optional[str]) -> None:
        try:
            changes, beta = parse_update(event.get("session"))
        except SessionConfigError as exc:
            raise _ClientError(str(exc), "invalid_value", exc.param) from None
        self.beta = beta
        state = self.control.session
        if "instructions" in changes:
            self.settings.instructions = changes["instructions"]
            state.instructions = changes["instructions"]
        if "modalities" in changes:
            modalities = changes["modalities"]
            self.settings.modalities = ["audio"] if "audio" in modalities else ["text"]
        if "voice" in changes:
            # Any voice name (OpenAI's or another) maps to the voice this gateway has loaded.
            self.settings.voice = changes["voice"]
        if "speed" in changes:
            state.speed = changes["speed"]
        if "max_tokens" in changes:
            state.max_tokens = 4096 if changes["max_tokens"] == "inf" else int(changes["max_tokens"])
        if "language" in changes:
            state.language = changes["language"]
        if "turn_detection" in changes:
            state.turn.apply(changes["turn_detection"])
        self.send("session.updated", session=self.describe())

    def _on_input_audio_buffer_append(self, event: dict, event_id: Optional[str]) -> None:
        raise _ClientError(
            "input_audio_buffer.append is not supported over WebRTC: send audio on the media track",
            "unsupported_event", "type",
        )

    def _on_input_audio_buffer_commit(self, event: dict, event_id: Optional[str]) -> None:
        self.control.commit_input()

    def _on_input_audio_buffer_clear(self, event: dict, event_id: Optional[str]) -> None:
        self.control.clear_input()
        self._speech_item = None
        self.send("input_audio_buffer.cleared")

    def _on_output_audio_buffer_clear(self, event: dict, event_id: Optional[str]) -> None:
        self._interrupt(self.control.interrupt(), reason="client_cancelled")

    def _on_conversation_item_create(self, event: dict, event_id: Optional[str]) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            raise _ClientError("missing required parameter 'item'", "missing_required_parameter", "item")
        item = _validate_item(item)
        previous = event.get("previous_item_id")
        index = len(self.items)
        if previous is not None:
            if previous == "root":
                index = 0
            else:
                found = self._find(previous)
                if found is None:
                    raise _ClientError(f"previous_item_id '{previous}' does not exist", "item_not_found", "previous_item_id")
                index = found + 1
        if self._find(item["id"]) is not None:
            raise _ClientError(f"an item with id '{item['id']}' already exists", "duplicate_item_id", "item.id")
        self._insert(item, index)

    def _on_conversation_item_retrieve(self, event: dict, event_id: Optional[str]) -> None:
        index = self._require_item(event)
        self.send("conversation.item.retrieved", item=self.items[index])

    def _on_conversation_item_truncate(self, event: dict, event_id: Optional[str]) -> None:
        index = self._require_item(event)
        item = self.items[index]
        audio_end_ms = event.get("audio_end_ms")
        content_index = event.get("content_index", 0)
        if item.get("role") != "assistant":
            raise _ClientError("only assistant message items can be truncated", "invalid_value", "item_id")
        if not isinstance(audio_end_ms, int) or isinstance(audio_end_ms, bool) or audio_end_ms < 0:
            raise _ClientError("'audio_end_ms' must be a non-negative integer", "invalid_value", "audio_end_ms")
        if content_index != 0:
            raise _ClientError("'content_index' must be 0", "invalid_value", "content_index")
        part = item["content"][0] if item["content"] else {}
        duration = part.get("_audio_ms")
        if duration is not None and audio_end_ms > duration:
            raise _ClientError(f"audio_end_ms {audio_end_ms} is past the item's audio ({duration} ms)", "invalid_value", "audio_end_ms")
        if duration:
            words = (part.get("transcript") or "").split()
            part["transcript"] = " ".join(words[: int(len(words) * audio_end_ms / duration)])
        self.send("conversation.item.truncated", item_id=item["id"], content_index=0, audio_end_ms=audio_end_ms)

    def _on_conversation_item_delete(self, event: dict, event_id: Optional[str]) -> None:
        index = self._require_item(event)
        item = self.items.pop(index)
        self.send("conversation.item.deleted", item_id=item["id"])

    def _on_response_create(self, event: dict, event_id: Optional[str]) -> None:
        params = event.get("response") or {}
        if not isinstance(params, dict):
            raise _ClientError("'response' must be an object", "invalid_type", "response")
        if self.response is not None and not self.response.done:
            raise _ClientError(
                f"Conversation already has an active response in progress: {self.response.id}. "
                "Wait until the response is finished before creating a new one.",
                "conversation_already_has_active_response", None,
            )
        modalities = params.get("output_modalities", params.get("modalities"))
        if modalities is not None and (not isinstance(modalities, list) or not set(modalities) <= {"audio", "text"} or not modalities):
            raise _ClientError("'output_modalities' must be a list of 'audio' and/or 'text'", "invalid_value", "response.output_modalities")
        instructions = params.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise _ClientError("'instructions' must be a string", "invalid_type", "response.instructions")
        conversation = params.get("conversation", "auto")
        extra_input = params.get("input")
        metadata = params.get("metadata") if isinstance(params.get("metadata"), dict) else None
        audio = "audio" in (modalities or self.settings.modalities)
        messages = self._prompt(instructions, extra_input if isinstance(extra_input, list) else None, conversation != "none")
        self._start_response(messages, audio, metadata=metadata, conversation=conversation != "none")

    def _on_response_cancel(self, event: dict, event_id: Optional[str]) -> None:
        response_id = event.get("response_id")
        active = self.response if self.response is not None and not self.response.done else None
        if active is None or (response_id is not None and response_id != active.id):
            if response_id is not None and any(r.id == response_id for r in self._by_generation.values()):
                interruption = self.control.interrupt()  # still playing: stop the audio
                self._interrupt(interruption, reason="client_cancelled")
                return
            raise _ClientError("no active response to cancel" if response_id is None else f"response '{response_id}' is not active",
                               "response_cancel_not_active", "response_id")
        self._interrupt(self.control.interrupt(), reason="client_cancelled")

    # ------------------------------------------------------------------ conversation helpers
    def _find(self, item_id: Any) -> Optional[int]:
        for index, item in enumerate(self.items):
            if item["id"] == item_id:
                return index
        return None

    def _require_item(self, event: dict) -> int:
        item_id = event.get("item_id")
        if not isinstance(item_id, str):
            raise _ClientError("missing required parameter 'item_id'", "missing_required_parameter", "item_id")
        index = self._find(item_id)
        if index is None:
            raise _ClientError(f"Item with item_id '{item_id}' not found", "item_not_found", "item_id")
        return index

    def _insert(self, item: dict, index: Optional[int] = None) -> None:
        index = len(self.items) if index is None else index
        previous = self.items[index - 1]["id"] if index > 0 else None
        self.items.insert(index, item)
        self.send("conversation.item.added", previous_item_id=previous, item=_public(item))
        if item.get("status") == "completed":
            self.send("conversation.item.done", previous_item_id=previous, item=_public(item))

    def _prompt(self, instructions: Optional[str], extra: Optional[list], use_conversation: bool) -> list[ChatMessage]:
        messages = [ChatMessage("system", instructions if instructions is not None else self.settings.instructions)]
        turns: list[ChatMessage] = []
        source = list(self.items) if use_conversation else []
        for raw in extra or []:
            if isinstance(raw, dict) and raw.get("type") == "message":
                source.append(_validate_item(dict(raw)))
        for item in source:
            if item.get("type") != "message":
                continue
            text = _item_text(item)
            if not text:
                continue
            role = item.get("role") if item.get("role") in ("user", "assistant") else "system"
            turns.append(ChatMessage(role, text))
        return messages + turns[-2 * self._history_turns :]

    def _start_response(self, messages: list[ChatMessage], audio: bool, latency: Optional[TurnLatency] = None,
                        metadata: Optional[dict] = None, conversation: bool = True) -> None:
        response_id = new_id("resp")
        item = message_item("assistant", [], status="in_progress")
        generation = self.control.create_response(messages, audio=audio, latency=latency)
        response = _Response(response_id, generation, audio, item, metadata=metadata, conversation=conversation)
        self.response = response
        self._by_generation = {generation: response}
        modalities = ["audio"] if audio else ["text"]
        self.send("response.created", response=response_object(response_id, modalities=modalities) | {"metadata": metadata})
        if conversation:
            self.items.append(item)
        self.send("response.output_item.added", response_id=response_id, output_index=0, item=_public(item))
        if conversation:
            previous = self.items[-2]["id"] if len(self.items) > 1 else None
            self.send("conversation.item.added", previous_item_id=previous, item=_public(item))
        part = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        item["content"] = [dict(part, type="output_audio" if audio else "output_text")]
        self.send("response.content_part.added", response_id=response_id, item_id=item["id"], output_index=0,
                  content_index=0, part=part)

    def _finish_response(self, response: _Response, status: str, reason: Optional[str] = None, usage: Optional[dict] = None) -> None:
        if response.done:
            return
        response.done = True
        response.status = status
        item = response.item
        item["status"] = "completed" if status == "completed" else "incomplete"
        ids = dict(response_id=response.id, item_id=item["id"], output_index=0, content_index=0)
        if response.audio:
            item["content"][0]["transcript"] = response.text
            self.send("response.output_audio.done", **ids)
            self.send("response.output_audio_transcript.done", transcript=response.text, **ids)
            part = {"type": "audio", "transcript": response.text}
        else:
            item["content"][0]["text"] = response.text
            self.send("response.output_text.done", text=response.text, **ids)
            part = {"type": "text", "text": response.text}
        self.send("response.content_part.done", part=part, **{k: v for k, v in ids.items()})
        self.send("response.output_item.done", response_id=response.id, output_index=0, item=_public(item))
        if response.conversation:
            self.send("conversation.item.done", item=_public(item))
        details = None
        if status == "cancelled":
            details = {"type": "cancelled", "reason": reason or "client_cancelled"}
        elif status == "incomplete":
            details = {"type": "incomplete", "reason": reason or "max_output_tokens"}
        elif status == "failed":
            details = {"type": "failed", "error": {"type": "server_error", "message": reason}}
        self.send(
            "response.done",
            response=response_object(response.id, status=status, output=[_public(item)],
                                     modalities=["audio"] if response.audio else ["text"], status_details=details,
                                     usage=usage or _usage(0))
            | {"metadata": response.metadata},
        )

    def _interrupt(self, interruption: Optional[pe.Interruption], reason: str) -> None:
        """A response was cancelled (barge-in, response.cancel, output_audio_buffer.clear)."""
        if interruption is None:
            return
        response = self._by_generation.get(interruption.generation)
        if response is None:
            return
        if interruption.audio_cleared:
            # Keep in the conversation only what the caller heard.
            response.text = interruption.heard_text
            if response.item.get("content"):
                response.item["content"][0]["_audio_ms"] = interruption.played_ms
            self.send("output_audio_buffer.cleared", response_id=response.id)
        if not response.done:
            self._finish_response(response, "cancelled", reason=reason)
        elif interruption.audio_cleared and response.item.get("content"):
            response.item["content"][0]["transcript"] = interruption.heard_text

    # ------------------------------------------------------------------ pipeline events
    def on_pipeline_event(self, event: pe.PipelineEvent) -> None:
        """Translate one pipeline event into server events (on the event loop)."""
        handler = getattr(self, "_ev_" + type(event).__name__, None)
        if handler is not None:
            handler(event)

    def _ev_SpeechStarted(self, event: pe.SpeechStarted) -> None:
        self._speech_item = new_id("item")
        self.send("input_audio_buffer.speech_started", audio_start_ms=event.audio_start_ms, item_id=self._speech_item)

    def _ev_SpeechStopped(self, event: pe.SpeechStopped) -> None:
        self.send("input_audio_buffer.speech_stopped", audio_end_ms=event.audio_end_ms, item_id=self._speech_item or new_id("item"))

    def _ev_InputCommitted(self, event: pe.InputCommitted) -> None:
        item_id = self._speech_item or new_id("item")
        self._speech_item = None
        item = message_item("user", [{"type": "input_audio", "transcript": None}], item_id=item_id, status="in_progress")
        previous = self.items[-1]["id"] if self.items else None
        self.send("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id)
        self.items.append(item)
        self.send("conversation.item.added", previous_item_id=previous, item=_public(item))

    def _pending_user_item(self) -> Optional[dict]:
        for item in reversed(self.items):
            if item.get("role") == "user" and item["content"] and item["content"][0].get("type") == "input_audio" \
                    and item["content"][0].get("transcript") is None:
                return item
        return None

    def _ev_TranscriptionCompleted(self, event: pe.TranscriptionCompleted) -> None:
        item = self._pending_user_item()
        if item is None:
            return
        item["content"][0]["transcript"] = event.transcript
        item["status"] = "completed"
        self.send("conversation.item.input_audio_transcription.delta", item_id=item["id"], content_index=0, delta=event.transcript)
        self.send("conversation.item.input_audio_transcription.completed", item_id=item["id"], content_index=0,
                  transcript=event.transcript, usage={"type": "duration", "seconds": 0})
        self.send("conversation.item.done", item=_public(item))
        turn = self.control.session.turn
        if turn.mode == "manual" or not turn.create_response or not event.transcript.strip():
            return
        if self.response is not None and not self.response.done:
            return  # OpenAI semantics: one response at a time
        audio = "audio" in self.settings.modalities
        self._start_response(self._prompt(None, None, True), audio, latency=event.latency)

    def _ev_TranscriptionFailed(self, event: pe.TranscriptionFailed) -> None:
        item = self._pending_user_item()
        if item is not None:
            item["status"] = "failed"
            self.send("conversation.item.input_audio_transcription.failed", item_id=item["id"], content_index=0,
                      error={"type": "transcription_error", "code": "stt_failed", "message": event.message})

    def _ev_ResponseTextDelta(self, event: pe.ResponseTextDelta) -> None:
        response = self._live(event.generation)
        if response is not None:
            response.text += event.delta
            self.send("response.output_text.delta", response_id=response.id, item_id=response.item["id"], output_index=0,
                      content_index=0, delta=event.delta)

    def _ev_ResponseAudioTranscriptDelta(self, event: pe.ResponseAudioTranscriptDelta) -> None:
        response = self._live(event.generation)
        if response is not None:
            response.text += event.delta
            self.send("response.output_audio_transcript.delta", response_id=response.id, item_id=response.item["id"],
                      output_index=0, content_index=0, delta=event.delta)

    def _ev_ResponseFinished(self, event: pe.ResponseFinished) -> None:
        response = self._live(event.generation)
        if response is None:
            return
        response.text = response.text.strip() if response.audio else event.text
        self._finish_response(response, event.status, usage=_usage(event.output_tokens))

    def _ev_PlaybackStarted(self, event: pe.PlaybackStarted) -> None:
        response = self._by_generation.get(event.generation)
        if response is not None and not response.playing:
            response.playing = True
            self.send("output_audio_buffer.started", response_id=response.id)

    def _ev_PlaybackStopped(self, event: pe.PlaybackStopped) -> None:
        response = self._by_generation.get(event.generation)
        if response is not None and response.playing:
            response.playing = False
            if response.item.get("content"):
                response.item["content"][0]["_audio_ms"] = event.played_ms
            self.send("output_audio_buffer.stopped", response_id=response.id)

    def _ev_ResponseInterrupted(self, event: pe.ResponseInterrupted) -> None:
        self._interrupt(event.interruption, reason="turn_detected")

    def _ev_TurnLatencyMeasured(self, event: pe.TurnLatencyMeasured) -> None:
        response = self._by_generation.get(event.generation)
        # Gateway extension: per-turn latency, in ms, for the demo page and benchmarks.
        self.send("gateway.latency", response_id=response.id if response else None, latency_ms=event.latency_ms)

    def _ev_StageFailed(self, event: pe.StageFailed) -> None:
        self.send_error(f"{event.stage} stage failed: {event.message}", code=f"{event.stage}_failed", error_type="server_error")
        if event.stage == "stt":
            self._ev_TranscriptionFailed(pe.TranscriptionFailed(event.session_id, message=event.message))
        if event.generation is not None:
            response = self._live(event.generation)
            if response is not None:
                self.control.interrupt()
                self._finish_response(response, "failed", reason=event.message)

    def _ev_InputRejected(self, event: pe.InputRejected) -> None:
        self.send_error(event.message, code=event.code)

    def _live(self, generation: int) -> Optional[_Response]:
        response = self._by_generation.get(generation)
        return response if response is not None and not response.done else None


class _ClientError(Exception):
    def __init__(self, message: str, code: Optional[str], param: Optional[str]) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


def _usage(output_tokens: int) -> dict:
    return {"total_tokens": output_tokens, "input_tokens": 0, "output_tokens": output_tokens}


def _public(item: dict) -> dict:
    """The item as clients see it (private bookkeeping keys removed)."""
    clean = {k: v for k, v in item.items()}
    clean["content"] = [{k: v for k, v in part.items() if not k.startswith("_")} for part in item.get("content", [])]
    return clean


def _item_text(item: dict) -> str:
    pieces = []
    for part in item.get("content", []):
        text = part.get("text") if part.get("text") is not None else part.get("transcript")
        if isinstance(text, str) and text.strip():
            pieces.append(text.strip())
    return " ".join(pieces)


_CONTENT_TYPES = {
    "user": {"input_text", "input_audio"},
    "system": {"input_text"},
    "assistant": {"output_text", "output_audio", "text", "audio"},
}


def _validate_item(item: dict) -> dict:
    """Check a client-supplied conversation item; fill in id/object/status."""
    kind = item.get("type")
    if kind not in ("message", "function_call", "function_call_output"):
        raise _ClientError("'item.type' must be 'message', 'function_call' or 'function_call_output'", "invalid_value", "item.type")
    if "id" in item and not isinstance(item["id"], str):
        raise _ClientError("'item.id' must be a string", "invalid_type", "item.id")
    item = dict(item)
    item.setdefault("id", new_id("item"))
    item["object"] = "realtime.item"
    item["status"] = "completed"
    if kind != "message":
        item.setdefault("content", [])
        return item
    role = item.get("role")
    if role not in _CONTENT_TYPES:
        raise _ClientError("'item.role' must be 'user', 'assistant' or 'system'", "invalid_value", "item.role")
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise _ClientError("'item.content' must be a non-empty array", "invalid_value", "item.content")
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in _CONTENT_TYPES[role]:
            allowed = ", ".join(sorted(_CONTENT_TYPES[role]))
            raise _ClientError(f"'item.content[{index}].type' must be one of: {allowed}", "invalid_value", f"item.content[{index}].type")
        if part["type"] in ("input_text", "output_text", "text") and not isinstance(part.get("text"), str):
            raise _ClientError(f"'item.content[{index}].text' must be a string", "invalid_type", f"item.content[{index}].text")
    return item
