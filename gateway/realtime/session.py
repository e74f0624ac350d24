"""RealtimeSession: the OpenAI Realtime protocol of one call, with no sockets and no audio.

It takes client events (JSON text from the ``oai-events`` data channel) and pipeline events (from
the unit's stages), keeps the conversation, and sends server events through ``send``. It drives the
pipeline only through the small :class:`PipelineControl` interface, and keeps time only through the
``call_later`` and ``clock`` it is given (the idle timeout of ``turn_detection.idle_timeout_ms``).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from gateway.models.base import ChatMessage
from gateway.pipeline import events as pe
from gateway.pipeline.latency import TurnLatency
from gateway.realtime.events import (
    CLIENT_ALIASES,
    CLIENT_EVENTS,
    GA_ONLY,
    GA_TO_BETA,
    error_event,
    message_item,
    new_id,
    public_item,
    rate_limits,
    response_object,
    server_event,
    usage,
)
from gateway.realtime.items import ClientError, is_int, item_text, validate_item
from gateway.realtime.session_config import BETA_FORMATS, MAX_OUTPUT_TOKENS, SessionConfigError, parse_update

log = logging.getLogger(__name__)

# Larger messages get an error. Below the 256 KiB SCTP message size aiortc and browsers advertise,
# so that a too-large message reaches us (and is refused with a reason) instead of failing in the
# sender's transport; far above any legitimate event, since audio never travels on the channel.
MAX_CLIENT_MESSAGE_BYTES = 128 * 1024
PCM_24K = {"type": "audio/pcm", "rate": 24000}


class PipelineControl(Protocol):
    """What the protocol layer may ask of the pipeline (implemented by PipelineUnit)."""

    session: Any  # SessionState: turn, instructions, speed, max_tokens, language, touch()

    def commit_input(self) -> None:
        """``input_audio_buffer.commit``: end the caller's turn now. The VAD thread answers with
        InputCommitted, or InputRejected when nothing is buffered. Ignored unless a call is served."""

    def clear_input(self) -> None:
        """``input_audio_buffer.clear``: drop the caller audio not yet committed. No event follows;
        the session itself sends ``input_audio_buffer.cleared``."""

    def create_response(self, messages: list[ChatMessage], audio: bool = True, latency: Optional[TurnLatency] = None) -> int:
        """Start a reply to ``messages`` (the whole prompt); ``audio`` False for text only. Returns its
        generation id, which makes any earlier reply stale; RuntimeError if no call is served."""

    def interrupt(self) -> Optional[pe.Interruption]:
        """Cancel the reply being generated or played and drop its unplayed audio at once; returns
        what the caller heard of it, or None when no reply was going on."""


@dataclass
class _PromptSpec:
    """What a response's LLM prompt is built from, once the caller's words are transcribed."""

    instructions: Optional[str] = None
    extra: list[dict] = field(default_factory=list)  # response.input items (item references resolved)
    use_conversation: bool = True
    note: Optional[str] = None  # a last user-side line (e.g. why an idle timeout answered)


@dataclass
class _Response:
    id: str
    audio: bool
    item: dict
    prompt: _PromptSpec
    conversation: bool = True  # False for out-of-band responses (``conversation: "none"``)
    metadata: Optional[dict] = None
    max_tokens: Optional[int] = None  # this response's own cap (response.max_output_tokens)
    latency: Optional[TurnLatency] = None
    generation: Optional[int] = None  # None until handed to the pipeline
    text: str = ""
    status: str = "in_progress"
    done: bool = False
    playing: bool = False


@dataclass
class _Settings:
    """What the client asked for (names as sent); ``describe`` reports what is really used."""

    instructions: str
    modalities: list[str] = field(default_factory=lambda: ["audio"])
    voice: Optional[str] = None
    model: Optional[str] = None
    transcription_model: Optional[str] = None
    input_format: dict = field(default_factory=lambda: dict(PCM_24K))
    output_format: dict = field(default_factory=lambda: dict(PCM_24K))


class RealtimeSession:
    """Protocol state of one call. ``send(event)`` must not block; it is called on the event loop.

    ``call_later(delay_s, callback)`` schedules the idle timeout (default: the running event loop's)
    and must return a handle with ``cancel()``; ``clock()`` is monotonic seconds. Tests pass fakes.
    """

    def __init__(
        self,
        control: PipelineControl,
        send: Callable[[dict], None],
        *,
        local_models: dict[str, str],
        history_turns: int = 6,
        call_later: Optional[Callable[[float, Callable[[], None]], Any]] = None,
        clock: Callable[[], float] = time.monotonic,
        max_call_s: Optional[float] = None,
    ) -> None:
        self.control = control
        self._send_raw = send
        self.id = new_id("sess")
        self.conversation_id = new_id("conv")
        self.beta = False
        self.items: list[dict] = []
        self._local = local_models
        self._history_turns = history_turns
        self._call_later = call_later
        self._clock = clock
        if max_call_s is None:  # a PipelineUnit carries the gateway config: the call's longest duration
            max_call_s = getattr(getattr(control, "config", None), "max_call_s", None)
        self._max_call_s = max_call_s
        self._started_at = time.time()
        state = control.session
        self.settings = _Settings(instructions=state.instructions)
        # The configured token cap: "inf" means this, and no client may go above it.
        self._token_cap = int(state.max_tokens)
        turn = state.turn
        self._turn_defaults = {name: getattr(turn, name) for name in (
            "threshold", "prefix_padding_ms", "silence_duration_ms", "create_response", "interrupt_response")}
        self.response: Optional[_Response] = None  # the latest response (active until done)
        self._by_generation: dict[int, _Response] = {}
        self._speech_item: Optional[str] = None  # item id of the caller turn being spoken
        self._speaking = False
        self._pending_transcripts: collections.deque[str] = collections.deque()  # committed, not yet transcribed
        self._pending_commits: collections.deque[Optional[str]] = collections.deque()  # client event ids
        self._audio_anchor = (0, clock())  # (input stream ms, clock) to estimate the stream position
        self._idle_handles: list[Any] = []
        self._idle_started_ms = 0
        self.closed = False

    # ------------------------------------------------------------------ output
    def send(self, event_type: str, **fields: Any) -> None:
        """Send a server event by its GA name (renamed or dropped for a beta session)."""
        if self.closed:
            return
        if self.beta:
            if event_type in GA_ONLY:
                return
            event_type = GA_TO_BETA.get(event_type, event_type)
        self._send_raw(server_event(event_type, **fields))

    def send_error(self, message: str, code: str | None = None, param: str | None = None,
                   event_id: str | None = None, error_type: str = "invalid_request_error") -> None:
        """Send an ``error``; ``event_id`` is the client event that caused it, if any."""
        if not self.closed:
            self._send_raw(error_event(message, code=code, param=param, event_id=event_id, error_type=error_type))

    def start(self) -> None:
        """Send ``session.created`` (when the data channel opens)."""
        self._audio_anchor = (0, self._clock())
        self.send("session.created", session=self.describe())
        self._maybe_arm_idle()

    def close(self, reason: str | None = None, message: str | None = None) -> None:
        """Say why the call ends (an ``error`` with code ``reason``) and send nothing more."""
        if reason and not self.closed:
            self.send_error(message or f"session closed: {reason}", code=reason, error_type="session_closed")
        self._disarm_idle()
        self.closed = True

    def describe(self) -> dict:
        """The effective session, in the shape the client speaks, naming the local models and voice
        really used whatever OpenAI names the client sent."""
        return self._describe_beta() if self.beta else self._describe_ga()

    def _describe_ga(self) -> dict:
        state = self.control.session
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self._local["llm"],
            "output_modalities": list(self.settings.modalities),
            "instructions": self.settings.instructions,
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": state.max_tokens,
            "tracing": None,
            "prompt": None,
            "expires_at": self._expires_at(),
            "audio": {
                "input": {
                    "format": dict(self.settings.input_format),
                    "transcription": {"model": self._local["stt"], "language": state.language},
                    "noise_reduction": None,
                    "turn_detection": self._turn_view(),
                },
                "output": {
                    "format": dict(self.settings.output_format),
                    "voice": self._local_voice(),
                    "speed": state.speed,
                },
            },
            "include": None,
        }

    def _describe_beta(self) -> dict:
        state = self.control.session
        return {
            "id": self.id,
            "object": "realtime.session",
            "model": self._local["llm"],
            "modalities": ["text", "audio"] if "audio" in self.settings.modalities else ["text"],
            "instructions": self.settings.instructions,
            "voice": self._local_voice(),
            "input_audio_format": _beta_format(self.settings.input_format),
            "output_audio_format": _beta_format(self.settings.output_format),
            "input_audio_transcription": {"model": self._local["stt"], "language": state.language},
            "input_audio_noise_reduction": None,
            "turn_detection": self._turn_view(),
            "tools": [],
            "tool_choice": "auto",
            "max_response_output_tokens": state.max_tokens,
            "speed": state.speed,
            "tracing": None,
            "expires_at": self._expires_at(),
        }

    def _turn_view(self) -> Optional[dict]:
        turn = self.control.session.turn
        if turn.mode == "manual":
            return None
        if turn.kind == "semantic_vad":
            return {"type": "semantic_vad", "eagerness": turn.eagerness,
                    "create_response": turn.create_response, "interrupt_response": turn.interrupt_response}
        return {
            "type": "server_vad",
            "threshold": turn.threshold,
            "prefix_padding_ms": turn.prefix_padding_ms,
            "silence_duration_ms": turn.silence_duration_ms,
            "idle_timeout_ms": turn.idle_timeout_ms,
            "create_response": turn.create_response,
            "interrupt_response": turn.interrupt_response,
        }

    def _local_voice(self) -> str:
        return self._local.get("voice", "joe")

    def _expires_at(self) -> Optional[int]:
        return int(self._started_at + self._max_call_s) if self._max_call_s else None

    def _view(self, item: dict) -> dict:
        return public_item(item, beta=self.beta)

    # ------------------------------------------------------------------ client events
    def handle_client_message(self, raw: str | bytes) -> None:
        """One data-channel message. Every problem becomes an ``error`` event; the call goes on.
        Once the session is closed, messages are ignored: the unit may already serve another call."""
        if self.closed:
            return
        event = self._decode(raw)
        if event is None:
            return
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        event_type = event.get("type")
        if not isinstance(event_type, str):
            self.send_error("The 'type' field is missing or not a string.", code="missing_required_parameter",
                            param="type", event_id=event_id)
            return
        event_type = CLIENT_ALIASES.get(event_type, event_type)
        if event_type not in CLIENT_EVENTS:
            supported = ", ".join(f"'{name}'" for name in CLIENT_EVENTS)
            self.send_error(f"Invalid value: '{event_type[:100]}'. Supported values are: {supported}.",
                            code="invalid_value", param="type", event_id=event_id)
            return
        handler = getattr(self, "_on_" + event_type.replace(".", "_"))
        try:
            handler(event, event_id)
        except ClientError as exc:
            self.send_error(str(exc), code=exc.code, param=exc.param, event_id=event_id)
        except Exception:  # a bug must cost this event, not the call
            log.exception("client event %s failed", event_type)
            self.send_error(f"The server failed to handle '{event_type}'.", code="server_error",
                            event_id=event_id, error_type="server_error")

    def _decode(self, raw: str | bytes) -> Optional[dict]:
        """The message as a JSON object, or None after sending the error that says why not."""
        size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
        if size > MAX_CLIENT_MESSAGE_BYTES:
            self.send_error(f"Message too large: {size} bytes (limit {MAX_CLIENT_MESSAGE_BYTES}).", code="message_too_large")
            return None
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.send_error("Messages must be UTF-8 JSON text.", code="invalid_json")
                return None
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.send_error(f"Invalid JSON: {exc.msg} at position {exc.pos}.", code="invalid_json")
            return None
        if not isinstance(event, dict):
            self.send_error("A client event must be a JSON object.", code="invalid_event")
            return None
        return event

    def _on_session_update(self, event: dict, event_id: Optional[str]) -> None:
        try:
            changes, beta = parse_update(event.get("session"), beta_default=self.beta)
        except SessionConfigError as exc:
            raise ClientError(str(exc), "invalid_value", exc.param) from None
        # Validated as a whole above: from here on nothing can fail half-way.
        self.beta = beta
        self._apply_settings(changes)
        if "turn_detection" in changes:
            self._apply_turn(changes["turn_detection"])
        self.send("session.updated", session=self.describe())

    def _apply_settings(self, changes: dict) -> None:
        settings, state = self.settings, self.control.session
        if "instructions" in changes:
            settings.instructions = state.instructions = changes["instructions"]
        if "modalities" in changes:
            settings.modalities = ["audio"] if "audio" in changes["modalities"] else ["text"]
        # Requested names are kept for the record; the local model and voice serve whatever was asked.
        for name in ("voice", "model", "transcription_model", "input_format", "output_format"):
            if name in changes:
                setattr(settings, name, changes[name])
        if "speed" in changes:
            state.speed = changes["speed"]
        if "max_tokens" in changes:
            state.max_tokens = self._cap_tokens(changes["max_tokens"])
        if "language" in changes:
            state.language = changes["language"]

    def _cap_tokens(self, requested: int | str) -> int:
        return self._token_cap if requested == "inf" else min(int(requested), self._token_cap)

    def _apply_turn(self, settings: Optional[dict]) -> None:
        """A new turn_detection object replaces the old one: fields it leaves out get their defaults."""
        turn = self.control.session.turn
        self._disarm_idle()
        if settings is None:
            turn.apply(None)
        else:
            turn.apply({**self._turn_defaults, **settings})
            turn.idle_timeout_ms = settings.get("idle_timeout_ms")  # apply() skips None; None clears it
        self._maybe_arm_idle()

    def _on_input_audio_buffer_append(self, event: dict, event_id: Optional[str]) -> None:
        raise ClientError(
                          "input_audio_buffer.append is not supported over WebRTC: send audio on the media track.",
            "unsupported_event", "type",
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
        self._interrupt(self.control.interrupt(), reason="client_cancelled")

    def _on_conversation_item_create(self, event: dict, event_id: Optional[str]) -> None:
        item = event.get("item")
        if not isinstance(item, dict):
            raise ClientError("Missing required parameter: 'item' (an object).", "missing_required_parameter", "item")
        item = validate_item(item)
        index = self._insert_index(event.get("previous_item_id"))
        if self._find(item["id"]) is not None:
            raise ClientError(f"An item with id '{item['id']}' already exists.", "duplicate_item_id", "item.id")
        self._insert(item, index)

    def _insert_index(self, previous: Any) -> int:
        if previous is None:
            return len(self.items)
        if previous == "root":
            return 0
        if not isinstance(previous, str):
            raise ClientError("'previous_item_id' must be a string.", "invalid_type", "previous_item_id")
        found = self._find(previous)
        if found is None:
            raise ClientError(f"Item with item_id '{previous}' not found.", "item_not_found", "previous_item_id")
        return found + 1

    def _on_conversation_item_retrieve(self, event: dict, event_id: Optional[str]) -> None:
        index = self._require_item(event)
        self.send("conversation.item.retrieved", item=self._view(self.items[index]))

    def _on_conversation_item_truncate(self, event: dict, event_id: Optional[str]) -> None:
        item = self.items[self._require_item(event)]
        audio_end_ms = event.get("audio_end_ms")
        content_index = event.get("content_index", 0)
        if item.get("role") != "assistant":
            raise ClientError("Only assistant message items can be truncated.", "invalid_value", "item_id")
        if not is_int(audio_end_ms) or audio_end_ms < 0:
            raise ClientError("'audio_end_ms' must be a non-negative integer.", "invalid_value", "audio_end_ms")
        if content_index != 0 or not item["content"]:
            raise ClientError("'content_index' must be 0 (the item's audio part).", "invalid_value", "content_index")
        part = item["content"][0]
        duration = part.get("_audio_ms")
        if duration is not None and audio_end_ms > duration:
            raise ClientError(f"audio_end_ms {audio_end_ms} is past the item's audio ({duration} ms).", "invalid_value",
                              "audio_end_ms")
        if duration:
            # Keep the words the caller heard: the transcript is cut in proportion to the audio.
            words = (part.get("transcript") or "").split()
            part["transcript"] = " ".join(words[: int(len(words) * audio_end_ms / duration)])
        self.send("conversation.item.truncated", item_id=item["id"], content_index=0, audio_end_ms=audio_end_ms)

    def _on_conversation_item_delete(self, event: dict, event_id: Optional[str]) -> None:
        item = self.items.pop(self._require_item(event))
        self.send("conversation.item.deleted", item_id=item["id"])

    def _on_response_create(self, event: dict, event_id: Optional[str]) -> None:
        params = event.get("response")
        params = {} if params is None else params
        if not isinstance(params, dict):
            raise ClientError("'response' must be an object.", "invalid_type", "response")
        active = self._active()
        if active is not None:
            raise ClientError(
                              f"Conversation already has an active response in progress: {active.id}. "
                "Wait until the response is finished before creating a new one.",
                "conversation_already_has_active_response", None,
            )
        audio = self._response_audio(params)
        conversation = params.get("conversation", "auto")
        if conversation not in ("auto", "none"):
            raise ClientError("'response.conversation' must be 'auto' or 'none'.", "invalid_value", "response.conversation")
        instructions = params.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise ClientError("'response.instructions' must be a string.", "invalid_type", "response.instructions")
        metadata = params.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise ClientError("'response.metadata' must be an object.", "invalid_type", "response.metadata")
        spec = _PromptSpec(instructions, self._response_input(params.get("input")), conversation == "auto")
        self._start_response(spec, audio, metadata=metadata, conversation=conversation == "auto",
                             max_tokens=self._response_tokens(params))

    def _response_audio(self, params: dict) -> bool:
        modalities = params.get("output_modalities", params.get("modalities"))
        if modalities is None:
            return "audio" in self.settings.modalities
        if not isinstance(modalities, list) or not modalities or not set(modalities) <= {"audio", "text"}:
            key = "modalities" if "modalities" in params else "output_modalities"
            raise ClientError(f"'response.{key}' must be a list of 'audio' and/or 'text'.", "invalid_value", f"response.{key}")
        return "audio" in modalities

    def _response_tokens(self, params: dict) -> Optional[int]:
        key = "max_output_tokens" if "max_output_tokens" in params else "max_response_output_tokens"
        tokens = params.get(key)
        if tokens is None:
            return None
        if tokens != "inf" and (not is_int(tokens) or not 1 <= tokens <= MAX_OUTPUT_TOKENS):
            raise ClientError(f"'response.{key}' must be 1..{MAX_OUTPUT_TOKENS} or 'inf'.", "invalid_value", f"response.{key}")
        return self._cap_tokens(tokens)

    def _response_input(self, raw: Any) -> list[dict]:
        """``response.input``: messages and references to conversation items, checked now."""
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise ClientError("'response.input' must be an array.", "invalid_type", "response.input")
        items = []
        for index, entry in enumerate(raw):
            if isinstance(entry, dict) and entry.get("type") == "item_reference":
                found = self._find(entry.get("id"))
                if found is None:
                    raise ClientError(f"Item with id '{entry.get('id')}' not found.", "item_not_found",
                                      f"response.input[{index}].id")
                items.append(self.items[found])
            elif isinstance(entry, dict):
                items.append(validate_item(entry, param=f"response.input[{index}]"))
            else:
                raise ClientError(f"'response.input[{index}]' must be an object.", "invalid_type", f"response.input[{index}]")
        return items

    def _on_response_cancel(self, event: dict, event_id: Optional[str]) -> None:
        response_id = event.get("response_id")
        if response_id is not None and not isinstance(response_id, str):
            raise ClientError("'response_id' must be a string.", "invalid_type", "response_id")
        active = self._active()
        if active is not None and response_id in (None, active.id):
            self._cancel(active, reason="client_cancelled")
            return
        playing = next((r for r in self._by_generation.values() if r.playing and response_id in (None, r.id)), None)
        if playing is not None:
            # Done generating but still being heard: cancelling it stops the audio. (A client
            # that sent the cancel before our response.done reached it lands here too.)
            self._interrupt(self.control.interrupt(), reason="client_cancelled")
            return
        message = "There is no active response to cancel." if response_id is None else f"Response '{response_id}' is not active."
        raise ClientError(message, "response_cancel_not_active", "response_id" if response_id else None)

    # ------------------------------------------------------------------ conversation helpers
    def _find(self, item_id: Any) -> Optional[int]:
        for index, item in enumerate(self.items):
            if item["id"] == item_id:
                return index
        return None

    def _require_item(self, event: dict) -> int:
        item_id = event.get("item_id")
        if item_id is None:
            raise ClientError("Missing required parameter: 'item_id'.", "missing_required_parameter", "item_id")
        if not isinstance(item_id, str):
            raise ClientError("Invalid type for 'item_id': expected a string.", "invalid_type", "item_id")
        index = self._find(item_id)
        if index is None:
            raise ClientError(f"Item with item_id '{item_id}' not found.", "item_not_found", "item_id")
        return index

    def _previous_id(self, index: int) -> Optional[str]:
        return self.items[index - 1]["id"] if index > 0 else None

    def _insert(self, item: dict, index: Optional[int] = None) -> None:
        index = len(self.items) if index is None else index
        previous = self._previous_id(index)
        self.items.insert(index, item)
        self.send("conversation.item.added", previous_item_id=previous, item=self._view(item))
        if item.get("status") == "completed":
            self.send("conversation.item.done", previous_item_id=previous, item=self._view(item))

    def _prompt(self, spec: _PromptSpec) -> list[ChatMessage]:
        """System instructions, then the last turns of the conversation (and response.input)."""
        system = ChatMessage("system", spec.instructions if spec.instructions is not None else self.settings.instructions)
        source = (list(self.items) if spec.use_conversation else []) + spec.extra
        turns: list[ChatMessage] = []
        for item in source:
            text = item_text(item) if item.get("type") == "message" else ""
            if text:
                role = item.get("role") if item.get("role") in ("user", "assistant") else "system"
                turns.append(ChatMessage(role, text))
        if spec.note:
            turns.append(ChatMessage("user", spec.note))
        return [system] + turns[-2 * self._history_turns :]

    # ------------------------------------------------------------------ responses
    def _active(self) -> Optional[_Response]:
        return self.response if self.response is not None and not self.response.done else None

    def _start_response(self, spec: _PromptSpec, audio: bool, latency: Optional[TurnLatency] = None,
                        metadata: Optional[dict] = None, conversation: bool = True, max_tokens: Optional[int] = None) -> None:
        item = message_item("assistant", [], status="in_progress")
        response = _Response(new_id("resp"), audio, item, spec, conversation=conversation, metadata=metadata,
                             max_tokens=max_tokens, latency=latency)
        self.response = response
        self._disarm_idle()
        self.send("response.created", response=self._response_body(response))
        if conversation:
            self.items.append(item)
        self.send("response.output_item.added", response_id=response.id, output_index=0, item=self._view(item))
        if conversation:
            self.send("conversation.item.added", previous_item_id=self._previous_id(len(self.items) - 1), item=self._view(item))
        item["content"] = [{"type": "output_audio", "transcript": ""} if audio else {"type": "output_text", "text": ""}]
        part = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        self.send("response.content_part.added", response_id=response.id, item_id=item["id"], output_index=0,
                  content_index=0, part=part)
        self._launch_when_ready()

    def _launch_when_ready(self) -> None:
        """Hand the active response to the pipeline once no committed turn awaits its transcript
        (the LLM only knows what the caller said through it)."""
        response = self._active()
        if response is None or response.generation is not None or self._pending_transcripts:
            return
        if any(r.playing for r in self._by_generation.values()):
            # A new generation makes the old reply's queued audio stale: say it was cut.
            self._interrupt(self.control.interrupt(), reason="client_cancelled")
        state = self.control.session
        saved = state.max_tokens
        if response.max_tokens is not None:
            state.max_tokens = response.max_tokens  # the pipeline reads the cap from the session
        try:
            response.generation = self.control.create_response(self._prompt(response.prompt), audio=response.audio,
                                                               latency=response.latency)
        finally:
            state.max_tokens = saved
        # Pipeline events only concern responses still generating or playing: forget the others.
        self._by_generation = {g: r for g, r in self._by_generation.items() if not r.done or r.playing}
        self._by_generation[response.generation] = response

    def _response_body(self, response: _Response, **fields: Any) -> dict:
        return response_object(
            response.id, conversation_id=self.conversation_id if response.conversation else None,
            audio=response.audio, voice=self._local_voice(), beta=self.beta,
            max_output_tokens=response.max_tokens or self.control.session.max_tokens, metadata=response.metadata, **fields,
        )

    def _finish_response(self, response: _Response, status: str, reason: Optional[str] = None,
                         tokens: int = 0) -> None:
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
        self.send("response.content_part.done", part=part, **ids)
        self.send("response.output_item.done", response_id=response.id, output_index=0, item=self._view(item))
        index = self._find(item["id"]) if response.conversation else None
        if index is not None:
            self.send("conversation.item.done", previous_item_id=self._previous_id(index), item=self._view(item))
        body = self._response_body(response, status=status, output=[self._view(item)],
                                   status_details=_status_details(status, reason), usage=usage(tokens))
        self.send("response.done", response=body)
        self.send("rate_limits.updated", rate_limits=rate_limits(self.control.session.max_tokens))
        self._maybe_arm_idle()

    def _cancel(self, response: _Response, reason: str) -> None:
        if response.generation is not None:
            self._interrupt(self.control.interrupt(), reason=reason)
        self._finish_response(response, "cancelled", reason=reason)

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
            response.playing = False
            if response.item.get("content"):
                response.item["content"][0]["_audio_ms"] = interruption.played_ms
                if response.done:
                    response.item["content"][0]["transcript"] = interruption.heard_text
            self.send("output_audio_buffer.cleared", response_id=response.id)
        if not response.done:
            self._finish_response(response, "cancelled", reason=reason)
        self._maybe_arm_idle()

    # ------------------------------------------------------------------ idle timeout
    def _idle_wanted(self) -> bool:
        """The caller's turn, with nothing said or said back: when ``idle_timeout_ms`` runs."""
        turn = self.control.session.turn
        return (not self.closed and turn.mode == "server_vad" and bool(turn.idle_timeout_ms) and not self._speaking
                and self._active() is None and not any(r.playing for r in self._by_generation.values()))

    def _maybe_arm_idle(self) -> None:
        if not self._idle_handles and self._idle_wanted():
            self._arm_idle()

    def _arm_idle(self) -> None:
        schedule = self._call_later
        if schedule is None:
            try:
                schedule = asyncio.get_running_loop().call_later
            except RuntimeError:
                log.warning("no event loop: idle_timeout_ms cannot be honoured")
                return
        timeout_s = self.control.session.turn.idle_timeout_ms / 1000
        self._idle_started_ms = self._audio_position_ms()
        # The pending timeout is work the call still has to do: keep the call's own idle watchdog
        # (which counts from the session's last activity) from ending the call before it fires.
        self.control.session.touch()
        self._idle_handles = [schedule(timeout_s / 2, self._idle_keepalive), schedule(timeout_s, self._idle_fired)]

    def _idle_keepalive(self) -> None:
        if not self.closed:  # a closed session's unit may already serve the next caller
            self.control.session.touch()

    def _disarm_idle(self) -> None:
        for handle in self._idle_handles:
            handle.cancel()
        self._idle_handles = []

    def _idle_fired(self) -> None:
        """``idle_timeout_ms`` of silence: commit the silent audio as a user turn and answer it."""
        self._idle_handles = []
        if not self._idle_wanted():
            return
        item_id = new_id("item")
        end_ms = self._audio_position_ms()
        self.send("input_audio_buffer.timeout_triggered", audio_start_ms=self._idle_started_ms, audio_end_ms=end_ms,
                  item_id=item_id)
        previous = self.items[-1]["id"] if self.items else None
        self.send("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id)
        item = message_item("user", [{"type": "input_audio", "transcript": ""}], item_id=item_id)
        self.items.append(item)
        self.send("conversation.item.added", previous_item_id=previous, item=self._view(item))
        seconds = round((end_ms - self._idle_started_ms) / 1000, 3)
        self.send("conversation.item.input_audio_transcription.completed", item_id=item_id, content_index=0,
                  transcript="", usage={"type": "duration", "seconds": seconds})
        self.send("conversation.item.done", previous_item_id=previous, item=self._view(item))
        if self.control.session.turn.create_response:
            note = f"(The caller has said nothing for {seconds:g} seconds.)"
            self._start_response(_PromptSpec(note=note), "audio" in self.settings.modalities)

    def _audio_position_ms(self) -> int:
        """Estimated position in the caller's input stream, which advances in real time; anchored
        at each VAD report (see _anchor)."""
        position, at = self._audio_anchor
        return int(position + (self._clock() - at) * 1000)

    def _anchor(self, position_ms: int) -> None:
        self._audio_anchor = (position_ms, self._clock())

    # ------------------------------------------------------------------ pipeline events
    def on_pipeline_event(self, event: pe.PipelineEvent) -> None:
        """Translate one pipeline event into server events (on the event loop)."""
        handler = getattr(self, "_ev_" + type(event).__name__, None)
        if handler is not None and not self.closed:
            handler(event)

    def _ev_SpeechStarted(self, event: pe.SpeechStarted) -> None:
        self._speech_item = new_id("item")
        self._speaking = True
        self._disarm_idle()
        # The VAD reports a start once min_speech_ms of speech is heard.
        self._anchor(event.audio_start_ms + self.control.session.turn.min_speech_ms)
        self.send("input_audio_buffer.speech_started", audio_start_ms=event.audio_start_ms, item_id=self._speech_item)

    def _ev_SpeechStopped(self, event: pe.SpeechStopped) -> None:
        # The VAD reports a stop after silence_duration_ms of silence.
        self._anchor(event.audio_end_ms + self.control.session.turn.silence_duration_ms)
        self.send("input_audio_buffer.speech_stopped", audio_end_ms=event.audio_end_ms,
                  item_id=self._speech_item or new_id("item"))

    def _ev_InputCommitted(self, event: pe.InputCommitted) -> None:
        if self._pending_commits:
            self._pending_commits.popleft()
        item_id = self._speech_item or new_id("item")
        self._speech_item = None
        self._speaking = False
        self._disarm_idle()
        previous = self.items[-1]["id"] if self.items else None
        self.send("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id)
        item = message_item("user", [{"type": "input_audio", "transcript": None}], item_id=item_id, status="in_progress")
        item["_audio_ms"] = event.audio_ms
        self.items.append(item)
        self._pending_transcripts.append(item_id)
        self.send("conversation.item.added", previous_item_id=previous, item=self._view(item))

    def _next_transcribed(self) -> Optional[dict]:
        """The committed item the next transcription belongs to (transcripts come in commit
        order); None if the client deleted it meanwhile."""
        if not self._pending_transcripts:
            return None
        index = self._find(self._pending_transcripts.popleft())
        return self.items[index] if index is not None else None

    def _ev_TranscriptionCompleted(self, event: pe.TranscriptionCompleted) -> None:
        item = self._next_transcribed()
        if item is not None:
            self._transcribed(item, event.transcript)
        if self._active() is not None:
            self._launch_when_ready()
            return
        turn = self.control.session.turn
        # A caller who is speaking again, or whose next turn is still being transcribed, has not
        # finished: answer once, after the last of their turns (a pause mid-sentence splits a turn).
        caller_continues = self._speaking or bool(self._pending_transcripts)
        if item is not None and turn.mode != "manual" and turn.create_response and event.transcript.strip() \
                and not caller_continues:
            self._start_response(_PromptSpec(), "audio" in self.settings.modalities, latency=event.latency)
        else:
            self._maybe_arm_idle()

    def _transcribed(self, item: dict, transcript: str) -> None:
        item["content"][0]["transcript"] = transcript
        item["status"] = "completed"
        if transcript:
            # Whisper gives the whole turn at once: one delta carries it.
            self.send("conversation.item.input_audio_transcription.delta", item_id=item["id"], content_index=0, delta=transcript)
        seconds = round(item.get("_audio_ms", 0) / 1000, 3)
        self.send("conversation.item.input_audio_transcription.completed", item_id=item["id"], content_index=0,
                  transcript=transcript, usage={"type": "duration", "seconds": seconds})
        self.send("conversation.item.done", previous_item_id=self._previous_id(self._find(item["id"])), item=self._view(item))

    def _ev_TranscriptionFailed(self, event: pe.TranscriptionFailed) -> None:
        item = self._next_transcribed()
        if item is not None:
            item["status"] = "incomplete"
            self.send("conversation.item.input_audio_transcription.failed", item_id=item["id"], content_index=0,
                      error={"type": "transcription_error", "code": "stt_failed", "message": event.message, "param": None})
        self._launch_when_ready()
        self._maybe_arm_idle()

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
        self._finish_response(response, event.status, tokens=event.output_tokens)

    def _ev_PlaybackStarted(self, event: pe.PlaybackStarted) -> None:
        response = self._by_generation.get(event.generation)
        if response is not None and not response.playing:
            response.playing = True
            self._disarm_idle()
            self.send("output_audio_buffer.started", response_id=response.id)

    def _ev_PlaybackStopped(self, event: pe.PlaybackStopped) -> None:
        response = self._by_generation.get(event.generation)
        if response is not None and response.playing:
            response.playing = False
            if response.item.get("content"):
                response.item["content"][0]["_audio_ms"] = event.played_ms
            self.send("output_audio_buffer.stopped", response_id=response.id)
            self._maybe_arm_idle()

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
        event_id = None
        if event.code.startswith("input_audio_buffer_commit") and self._pending_commits:
            event_id = self._pending_commits.popleft()
        self.send_error(event.message, code=event.code, event_id=event_id)

    def _live(self, generation: int) -> Optional[_Response]:
        response = self._by_generation.get(generation)
        return response if response is not None and not response.done else None


def _status_details(status: str, reason: Optional[str]) -> Optional[dict]:
    if status == "cancelled":
        return {"type": "cancelled", "reason": reason or "client_cancelled"}
    if status == "incomplete":
        return {"type": "incomplete", "reason": reason or "max_output_tokens"}
    if status == "failed":
        return {"type": "failed", "error": {"type": "server_error", "code": "response_failed", "message": reason}}
    return None


def _beta_format(fmt: dict) -> str:
    for name, ga in BETA_FORMATS.items():
        if ga["type"] == fmt.get("type"):
            return name
    return "pcm16"
