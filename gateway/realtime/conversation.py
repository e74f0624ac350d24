"""The conversation of one Realtime session: its items in order, and the LLM prompt built from them.

Items are ``realtime.item`` dicts (``message`` items as ``events.message_item`` makes them); keys that
start with ``_`` are private bookkeeping (``_audio_ms``: duration of the item's audio, ms), removed
from what a client sees. The conversation sends the ``conversation.item.*`` and
``input_audio_buffer.committed`` events of its own changes (OpenAI Realtime API server events);
methods that take a client's ids raise :class:`ClientError` with OpenAI's error codes
(``item_not_found``, ``invalid_type``...) and change nothing then.

Sizes are bounded by the session's :class:`~gateway.realtime.limits.SessionLimits`: a client item
whose text is over ``max_item_chars``, or one more than ``max_conversation_items``, is refused
(items the server adds for spoken turns and replies push out the oldest instead), and the prompt
holds at most ``max_prompt_chars`` of conversation. ``function_call`` and ``function_call_output``
items reach the model as an assistant message with ``tool_calls`` and a ``tool`` message.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from gateway.models.base import ChatMessage, ToolCall
from gateway.realtime.events import message_item
from gateway.realtime.items import ClientError, is_int, item_text, validate_item
from gateway.realtime.limits import SessionLimits
from gateway.realtime.sender import EventSender


@dataclass
class PromptSpec:
    """What a response's LLM prompt is built from, once the caller's words are transcribed."""

    instructions: Optional[str] = None  # response.instructions; None: the session's
    extra: list[dict] = field(default_factory=list)  # response.input items (item references resolved)
    use_conversation: bool = True  # False for ``conversation: "none"`` responses
    note: Optional[str] = None  # a last user-side line (e.g. why an idle timeout answered)


class Conversation:
    """The items of one session, and the caller turns committed but not yet transcribed (STT
    reports transcripts in commit order). ``history_turns``: how many user/assistant pairs of the
    conversation the prompt keeps; ``limits``: what a client may add (default ``SessionLimits()``)."""

    def __init__(self, sender: EventSender, history_turns: int, limits: Optional[SessionLimits] = None) -> None:
        self._sender = sender
        self.items: list[dict] = []
        self._history_turns = history_turns
        self.limits = limits or SessionLimits()
        self._untranscribed: collections.deque[str] = collections.deque()  # item ids, in commit order

    # ----- lookup -----
    def find(self, item_id: Any) -> Optional[int]:
        """The index of item ``item_id``, or None."""
        for index, item in enumerate(self.items):
            if item["id"] == item_id:
                return index
        return None

    def require(self, item_id: Any) -> int:
        """The index of the item a client event names in ``item_id``; ClientError if it is missing,
        not a string, or no such item."""
        if item_id is None:
            raise ClientError("Missing required parameter: 'item_id'.", "missing_required_parameter", "item_id")
        if not isinstance(item_id, str):
            raise ClientError("Invalid type for 'item_id': expected a string.", "invalid_type", "item_id")
        index = self.find(item_id)
        if index is None:
            raise ClientError(f"Item with item_id '{item_id}' not found.", "item_not_found", "item_id")
        return index

    def previous_id(self, index: int) -> Optional[str]:
        """The id of the item before position ``index`` (``previous_item_id``), None at the start."""
        return self.items[index - 1]["id"] if index > 0 else None

    def last_id(self) -> Optional[str]:
        """The id of the last item, None when the conversation is empty."""
        return self.items[-1]["id"] if self.items else None

    # ----- changes -----
    def insert(self, item: dict, index: Optional[int] = None) -> Optional[str]:
        """Put ``item`` at ``index`` (default: the end); returns its ``previous_item_id``. Sends
        nothing, unless the conversation is past ``max_conversation_items``: then the oldest finished
        items are dropped (never ``item``), each with ``conversation.item.deleted``."""
        index = len(self.items) if index is None else index
        previous = self.previous_id(index)
        self.items.insert(index, item)
        excess = len(self.items) - self.limits.max_conversation_items
        if excess > 0:
            busy = set(self._untranscribed) | {item["id"]}
            for old in [i for i in self.items if i["id"] not in busy and i.get("status") != "in_progress"][:excess]:
                self.items.remove(old)
                self._sender.send("conversation.item.deleted", item_id=old["id"])
        return previous

    def add(self, item: dict, index: Optional[int] = None) -> None:
        """Insert ``item`` and say so (``conversation.item.added``, and ``.done`` if it is complete)."""
        previous = self.insert(item, index)
        self._sender.send("conversation.item.added", previous_item_id=previous, item=self._sender.view(item))
        if item.get("status") == "completed":
            self._sender.send("conversation.item.done", previous_item_id=previous, item=self._sender.view(item))

    def create(self, item: Any, previous_item_id: Any) -> None:
        """``conversation.item.create``: validate the client's item and add it after ``previous_item_id``
        (None: at the end; ``"root"``: at the start)."""
        if not isinstance(item, dict):
            raise ClientError("Missing required parameter: 'item' (an object).", "missing_required_parameter", "item")
        item = validate_item(item)
        self.limits.check_item(item, "item")
        self.limits.check_room(len(self.items))
        index = self._insert_index(previous_item_id)
        if self.find(item["id"]) is not None:
            raise ClientError(f"An item with id '{item['id']}' already exists.", "duplicate_item_id", "item.id")
        self.add(item, index)

    def _insert_index(self, previous: Any) -> int:
        if previous is None:
            return len(self.items)
        if previous == "root":
            return 0
        if not isinstance(previous, str):
            raise ClientError("'previous_item_id' must be a string.", "invalid_type", "previous_item_id")
        found = self.find(previous)
        if found is None:
            raise ClientError(f"Item with item_id '{previous}' not found.", "item_not_found", "previous_item_id")
        return found + 1

    def retrieve(self, item_id: Any) -> None:
        """``conversation.item.retrieve``: send the item (``conversation.item.retrieved``)."""
        item = self.items[self.require(item_id)]
        self._sender.send("conversation.item.retrieved", item=self._sender.view(item))

    def truncate(
        self, item_id: Any, content_index: Any, audio_end_ms: Any, stop: Callable[[str], None] = lambda _id: None
    ) -> None:
        """``conversation.item.truncate``: cut an assistant item's audio at ``audio_end_ms`` (ms)
        and keep the words the caller heard (the transcript is cut in proportion). ``stop(item_id)``
        is called once the event is found valid, before the cut: it ends the reply still generating
        or playing the item, so that nothing is added to it after the cut."""
        item = self.items[self.require(item_id)]
        if item.get("role") != "assistant":
            raise ClientError("Only assistant message items can be truncated.", "invalid_value", "item_id")
        if not is_int(audio_end_ms) or audio_end_ms < 0:
            raise ClientError("'audio_end_ms' must be a non-negative integer.", "invalid_value", "audio_end_ms")
        if content_index != 0 or not item["content"]:
            raise ClientError("'content_index' must be 0 (the item's audio part).", "invalid_value", "content_index")
        part = item["content"][0]
        # A client that plays the audio itself (WebSocket) may have heard all that was sent
        # (``_sent_ms``), more than the server's estimate of what it heard (``_audio_ms``).
        sent = part.get("_sent_ms")
        duration = part.get("_audio_ms", sent)
        limit = max(duration, sent) if duration is not None and sent is not None else duration
        if limit is not None and audio_end_ms > limit:
            raise ClientError(
                f"audio_end_ms {audio_end_ms} is past the item's audio ({int(limit)} ms).",
                "invalid_value",
                "audio_end_ms",
            )
        stop(item["id"])
        duration = part.get("_audio_ms", part.get("_sent_ms"))  # what the stop left of it
        if duration and audio_end_ms < duration:
            words = (part.get("transcript") or "").split()
            part["transcript"] = " ".join(words[: int(len(words) * audio_end_ms / duration)])
        self._sender.send("conversation.item.truncated", item_id=item["id"], content_index=0, audio_end_ms=audio_end_ms)

    def delete(self, item_id: Any) -> None:
        """``conversation.item.delete``: remove the item (``conversation.item.deleted``)."""
        item = self.items.pop(self.require(item_id))
        self._sender.send("conversation.item.deleted", item_id=item["id"])

    # ----- caller turns -----
    def commit_audio(self, item_id: str, audio_ms: int) -> None:
        """A caller turn of ``audio_ms`` ms went to STT: its user item, in progress until transcribed
        (``input_audio_buffer.committed``, ``conversation.item.added``)."""
        previous = self.last_id()
        self._sender.send("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id)
        item = message_item(
            "user", [{"type": "input_audio", "transcript": None}], item_id=item_id, status="in_progress"
        )
        item["_audio_ms"] = audio_ms
        self.insert(item)
        self._untranscribed.append(item_id)
        self._sender.send("conversation.item.added", previous_item_id=previous, item=self._sender.view(item))

    def commit_silence(self, item_id: str, seconds: float) -> None:
        """``idle_timeout_ms`` ran out: the silent audio (``seconds`` long) becomes a user turn with
        an empty transcript (committed, added, transcribed and done at once)."""
        previous = self.last_id()
        self._sender.send("input_audio_buffer.committed", previous_item_id=previous, item_id=item_id)
        item = message_item("user", [{"type": "input_audio", "transcript": ""}], item_id=item_id)
        self.insert(item)
        self._sender.send("conversation.item.added", previous_item_id=previous, item=self._sender.view(item))
        self._sender.send(
            "conversation.item.input_audio_transcription.completed",
            item_id=item_id,
            content_index=0,
            transcript="",
            usage={"type": "duration", "seconds": seconds},
        )
        self._sender.send("conversation.item.done", previous_item_id=previous, item=self._sender.view(item))

    @property
    def awaiting_transcript(self) -> bool:
        """True while a committed caller turn has no transcript yet."""
        return bool(self._untranscribed)

    def transcribed(self, transcript: str) -> Optional[dict]:
        """STT's text of the oldest committed turn not yet transcribed (STT keeps commit order):
        complete its item. Returns the item, or None if the client deleted it meanwhile."""
        item = self._next_untranscribed()
        if item is None:
            return None
        item["content"][0]["transcript"] = transcript
        item["status"] = "completed"
        send, ids = self._sender.send, dict(item_id=item["id"], content_index=0)
        if transcript:
            # Whisper gives the whole turn at once: one delta carries it.
            send("conversation.item.input_audio_transcription.delta", **ids, delta=transcript)
        seconds = round(item.get("_audio_ms", 0) / 1000, 3)
        send(
            "conversation.item.input_audio_transcription.completed",
            **ids,
            transcript=transcript,
            usage={"type": "duration", "seconds": seconds},
        )
        index = self.find(item["id"])
        previous = self.previous_id(index) if index is not None else None
        send("conversation.item.done", previous_item_id=previous, item=self._sender.view(item))
        return item

    def transcription_failed(self, message: str) -> None:
        """The oldest committed turn not yet transcribed could not be: its item is incomplete."""
        item = self._next_untranscribed()
        if item is not None:
            item["status"] = "incomplete"
            error = {"type": "transcription_error", "code": "stt_failed", "message": message, "param": None}
            self._sender.send(
                "conversation.item.input_audio_transcription.failed", item_id=item["id"], content_index=0, error=error
            )

    def _next_untranscribed(self) -> Optional[dict]:
        if not self._untranscribed:
            return None
        index = self.find(self._untranscribed.popleft())
        return self.items[index] if index is not None else None

    def caller_unanswered(self) -> bool:
        """True when the caller's last words have no reply yet: the newest item, past the messages
        with no words (the caller's click or breath transcribed as nothing, a reply cancelled before
        it said a word), is a user message with words (no reply, tool call or output came after it)."""
        for item in reversed(self.items):
            message = item.get("type") == "message"
            if message and not item_text(item):
                continue
            return message and item.get("role") == "user"
        return False

    # ----- the prompt -----
    def resolve_input(self, raw: Any) -> list[dict]:
        """``response.input``: messages and references to conversation items, checked now (at most
        ``max_conversation_items`` of them: :meth:`SessionLimits.check_input_count`)."""
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise ClientError("'response.input' must be an array.", "invalid_type", "response.input")
        self.limits.check_input_count(len(raw), "response.input")
        items = []
        for index, entry in enumerate(raw):
            if isinstance(entry, dict) and entry.get("type") == "item_reference":
                found = self.find(entry.get("id"))
                if found is None:
                    raise ClientError(
                        f"Item with id '{entry.get('id')}' not found.", "item_not_found", f"response.input[{index}].id"
                    )
                items.append(self.items[found])
            elif isinstance(entry, dict):
                item = validate_item(entry, param=f"response.input[{index}]")
                self.limits.check_item(item, f"response.input[{index}]")
                items.append(item)
            else:
                raise ClientError(
                    f"'response.input[{index}]' must be an object.", "invalid_type", f"response.input[{index}]"
                )
        return items

    def prompt(self, spec: PromptSpec, instructions: str) -> list[ChatMessage]:
        """System instructions (``spec``'s, else ``instructions``), then the last ``history_turns``
        turns of the conversation and ``response.input``, then ``spec.note``; at most
        ``max_prompt_chars`` in all (oldest messages dropped first; a tool output keeps its call)."""
        system = ChatMessage("system", spec.instructions if spec.instructions is not None else instructions)
        source = (list(self.items) if spec.use_conversation else []) + spec.extra
        turns = chat_messages(source)
        if spec.note:
            turns.append(ChatMessage("user", spec.note))
        turns = _keep_calls(turns, max(0, len(turns) - 2 * self._history_turns))
        return [system, *_within_chars(turns, self.limits.max_prompt_chars - len(system.content))]


def chat_messages(items: list[dict]) -> list[ChatMessage]:
    """Conversation items as chat messages: message items with words as their role's message (a
    system item as a system message); a ``function_call`` as an assistant message's ``tool_calls``
    (joined to the assistant message just before it); a ``function_call_output`` as a ``tool``
    message answering its ``call_id``."""
    messages: list[ChatMessage] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            call = ToolCall(str(item.get("call_id", "")), str(item.get("name", "")), str(item.get("arguments") or "{}"))
            if messages and messages[-1].role == "assistant":
                messages[-1].tool_calls.append(call)
            else:
                messages.append(ChatMessage("assistant", "", tool_calls=[call]))
        elif kind == "function_call_output":
            messages.append(ChatMessage("tool", str(item.get("output", "")), tool_call_id=item.get("call_id")))
        elif kind == "message":
            text = item_text(item)
            if text:
                role = str(item["role"]) if item.get("role") in ("user", "assistant") else "system"
                messages.append(ChatMessage(role, text))
    return messages


def _keep_calls(messages: list[ChatMessage], start: int) -> list[ChatMessage]:
    """``messages[start:]``, started earlier if needed so that no tool output loses its call."""
    while 0 < start < len(messages) and messages[start].role == "tool":
        start -= 1
    return messages[start:]


def _size(message: ChatMessage) -> int:
    return len(message.content) + sum(len(c.name) + len(c.arguments) for c in message.tool_calls)


def _within_chars(messages: list[ChatMessage], budget: int) -> list[ChatMessage]:
    """The newest messages whose characters fit ``budget``, oldest dropped first, but never the last
    user message or what follows it (the engine cuts those to its context if it must)."""
    total = sum(_size(m) for m in messages)
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=len(messages) - 1)
    start = 0
    while total > budget and start < last_user:
        total -= _size(messages[start])
        start += 1
    while start < last_user and messages[start].role == "tool":
        start += 1  # an output whose call was dropped
    return messages[start:]
