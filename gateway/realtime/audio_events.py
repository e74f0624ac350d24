"""Audio inside Realtime events, for transports that carry it there (the WebSocket transport):
``input_audio_buffer.append`` in, ``response.output_audio.delta`` out. Only base64 and JSON here;
the codec work (G.711, resampling) is the transport's, with ``gateway.media.audio_format``.

Reference: the OpenAI Realtime API client event ``input_audio_buffer.append`` (``audio``: base64
bytes in the session's ``audio.input.format``) and server event ``response.output_audio.delta``
(beta ``response.audio.delta``; ``delta``: base64 bytes in ``audio.output.format``). The
``output_audio_buffer.*`` server events exist over WebRTC only, where the server plays the audio;
over a WebSocket the client plays it and they are not sent.

:class:`EventAudioSession` is the Realtime session of such a transport: :class:`RealtimeSession`
itself, with only the audio I/O of those events added.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, Optional, Protocol

from gateway.realtime.control import PipelineControl
from gateway.realtime.items import ClientError
from gateway.realtime.session import RealtimeSession

# Messages over this get an ``error`` (the session goes on). Audio travels in the events, so far more
# than over the data channel: about 2.9 min of 24 kHz 16-bit PCM once base64-encoded; OpenAI takes up
# to 15 MiB of audio in one append, so the transport's hard limit (its frame size) sits above this.
MAX_EVENT_MESSAGE_BYTES = 8 * 1024 * 1024

# Server events of the WebRTC transport only (the server plays the audio out on the track).
WEBRTC_ONLY_EVENTS = frozenset(
    {"output_audio_buffer.started", "output_audio_buffer.stopped", "output_audio_buffer.cleared"}
)


class AudioInput(Protocol):
    """Where a session on an event transport puts the caller audio of ``input_audio_buffer.append``."""

    def append(self, audio: bytes, input_format: dict) -> None:
        """``audio``: the decoded bytes, in ``input_format`` (the session's GA format object,
        ``{"type": "audio/pcm", "rate": 24000}``...). Raises ValueError, with a message for the
        client, for bytes that cannot be audio of that format (an odd byte count of 16-bit PCM...)."""


def appended_audio(event: dict) -> bytes:
    """The bytes of an ``input_audio_buffer.append``. Raises ClientError (``param`` ``audio``)
    when ``audio`` is missing, not a string, empty or not valid base64."""
    raw: Any = event.get("audio")
    if raw is None:
        raise ClientError("Missing required parameter: 'audio'.", "missing_required_parameter", "audio")
    if not isinstance(raw, str):
        raise ClientError("Invalid type for 'audio': expected a base64-encoded string.", "invalid_type", "audio")
    try:
        audio = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ClientError(
            "Invalid value for 'audio': not valid base64 (RFC 4648, standard alphabet, padded).",
            "invalid_value",
            "audio",
        ) from None
    if not audio:
        raise ClientError("Invalid value for 'audio': the audio is empty.", "invalid_value", "audio")
    return audio


def encoded_audio(audio: bytes) -> str:
    """Bytes of reply audio as the ``delta`` of ``response.output_audio.delta`` (base64)."""
    return base64.b64encode(audio).decode("ascii")


class EventAudioSession(RealtimeSession):
    """The Realtime session of a transport that carries audio in its events (WebSocket): the same
    protocol as over WebRTC, except that

    - ``input_audio_buffer.append`` decodes ``audio`` (base64) and hands the bytes to ``audio_input``
      with the session's input format; problems are an ``error`` naming ``audio``, the session goes on;
    - reply audio goes out as ``response.output_audio.delta`` (:meth:`send_output_audio`);
    - the WebRTC-only ``output_audio_buffer.*`` server events are not sent;
    - messages may be up to ``MAX_EVENT_MESSAGE_BYTES``.

    ``beta``: the client asked for the beta protocol when it connected (``OpenAI-Beta: realtime=v1``),
    so beta names and shapes apply from ``session.created`` on. Other arguments as for RealtimeSession.
    """

    max_message_bytes = MAX_EVENT_MESSAGE_BYTES

    def __init__(
        self,
        control: PipelineControl,
        send: Callable[[dict], None],
        *,
        audio_input: AudioInput,
        beta: bool = False,
        **kwargs: Any,
    ) -> None:
        def send_event(event: dict) -> None:
            if event.get("type") not in WEBRTC_ONLY_EVENTS:
                send(event)

        super().__init__(control, send_event, **kwargs)
        self._audio_input = audio_input
        self._sender.beta = beta

    def _on_input_audio_buffer_append(self, event: dict, event_id: Optional[str]) -> None:
        audio = appended_audio(event)
        try:
            self._audio_input.append(audio, self.settings.input_format)
        except ValueError as exc:
            raise ClientError(f"Invalid value for 'audio': {exc}.", "invalid_value", "audio") from None

    def send_output_audio(self, generation: int, audio: bytes, duration_ms: float) -> None:
        """Reply audio of pipeline generation ``generation``, ``duration_ms`` long, in the session's
        output format: ``response.output_audio.delta`` of its response (dropped once the response is
        done or cut, or for a text-only one). The audio sent is counted in the item (``_sent_ms``),
        so that ``conversation.item.truncate`` accepts what the client may have played."""
        if self.closed:
            return
        response = self.responses.of_generation(generation)
        if response is None or response.done or not response.audio or not response.item.get("content"):
            return
        part = response.item["content"][0]
        part["_sent_ms"] = part.get("_sent_ms", 0) + duration_ms
        self.send(
            "response.output_audio.delta",
            response_id=response.id,
            item_id=response.item["id"],
            output_index=0,
            content_index=0,
            delta=encoded_audio(audio),
        )
