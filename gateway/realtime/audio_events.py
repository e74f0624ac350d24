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

Caller audio costs what real time costs (``gateway.realtime.audio_intake``): a session may append
a burst of audio at once, then 4 s of audio a second; beyond that it is dropped with one
``rate_limit_exceeded`` error per flood. On the event loop an append costs only length checks (its
duration follows from the base64 length and the format): an append too large for the budget is
refused by the message's length before it is parsed, and what is accepted is decoded off the loop
by the transport.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, Optional, Protocol

from gateway.media.audio_format import AudioFormat, check_not_wav, check_whole_samples
from gateway.realtime.audio_intake import AudioIntake
from gateway.realtime.client_messages import RATE_LIMIT_CODE, RATE_LIMIT_TYPE
from gateway.realtime.control import PipelineControl
from gateway.realtime.items import ClientError
from gateway.realtime.session import RealtimeSession

# Messages over this get an ``error`` (the session goes on), unparsed. Audio travels in the events,
# so far more than over the data channel; OpenAI takes up to 15 MiB in one event, and the
# transport's hard limit (its frame size) sits above both.
MAX_EVENT_MESSAGE_BYTES = 8 * 1024 * 1024

_NOT_BASE64 = "not valid base64 (RFC 4648, standard alphabet, padded)"
# Base64 characters decoded at a time (a multiple of 4): each step holds the interpreter briefly.
_BASE64_PIECE = 64 * 1024

# Server events of the WebRTC transport only (the server plays the audio out on the track).
WEBRTC_ONLY_EVENTS = frozenset(
    {"output_audio_buffer.started", "output_audio_buffer.stopped", "output_audio_buffer.cleared"}
)


class AudioInput(Protocol):
    """Where a session on an event transport puts the caller audio of ``input_audio_buffer.append``.
    The transport decodes it off the event loop, one append after the other."""

    @property
    def pending_s(self) -> float:
        """Seconds of appended audio not yet decoded and submitted."""

    def append(self, audio: str, input_format: dict, refused: Callable[[str], None]) -> None:
        """``audio``: base64 text of audio in ``input_format`` (the session's GA format object,
        ``{"type": "audio/pcm", "rate": 24000}``...), its length checked by the session (whole
        samples, within the budget), its characters not: it is decoded off the event loop, after
        the appends before it. When it is not valid base64 or not audio of that format, nothing of
        it is submitted and ``refused(reason)`` runs on the loop (``reason`` for the client)."""

    def then(self, action: Callable[[], None], flush: bool = False) -> None:
        """Run ``action`` on the event loop once the appends before it are submitted (at once when
        none is waiting): a commit or clear keeps its place after the audio sent before it. With
        ``flush`` (a commit), the samples a resampler still holds of them are submitted first."""


def appended_audio(event: dict) -> str:
    """The base64 text of an ``input_audio_buffer.append``, checked by its length only (cheap, on
    the event loop; the characters are checked as it is decoded, :func:`decode_base64`). Raises
    ClientError (``param`` ``audio``) when ``audio`` is missing, not a string, empty or not a
    multiple of 4 characters long."""
    raw: Any = event.get("audio")
    if raw is None:
        raise ClientError("Missing required parameter: 'audio'.", "missing_required_parameter", "audio")
    if not isinstance(raw, str):
        raise ClientError("Invalid type for 'audio': expected a base64-encoded string.", "invalid_type", "audio")
    if not raw:
        raise ClientError("Invalid value for 'audio': the audio is empty.", "invalid_value", "audio")
    if len(raw) % 4:
        raise ClientError(f"Invalid value for 'audio': {_NOT_BASE64}.", "invalid_value", "audio")
    return raw


def base64_size(text: str) -> int:
    """Bytes that base64 ``text`` (a multiple of 4 characters) decodes to, from its length."""
    return len(text) // 4 * 3 - (2 if text.endswith("==") else 1 if text.endswith("=") else 0)


def decode_base64(text: str) -> bytes:
    """The bytes of base64 ``text`` (RFC 4648, standard alphabet, padded), decoded
    ``_BASE64_PIECE`` characters at a time. Raises ValueError (its text for the client)."""
    decoded = bytearray()
    for start in range(0, len(text), _BASE64_PIECE):
        piece = text[start : start + _BASE64_PIECE]
        if start + _BASE64_PIECE < len(text) and "=" in piece:
            raise ValueError(_NOT_BASE64)  # padding before the end
        try:
            decoded += base64.b64decode(piece, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(_NOT_BASE64) from None
    return bytes(decoded)


def appended_seconds(audio: str, fmt: AudioFormat) -> float:
    """Seconds of audio in base64 ``audio`` of ``fmt``, from its length; its first bytes are
    decoded to see that it is no WAV file. Raises ClientError (``param`` ``audio``) for a WAV
    header, bytes that are no whole number of samples, or a first piece that is not base64."""
    size = base64_size(audio)
    try:
        check_not_wav(decode_base64(audio[:16]))
        check_whole_samples(size, fmt)
    except ValueError as exc:
        raise ClientError(f"Invalid value for 'audio': {exc}.", "invalid_value", "audio") from None
    return fmt.duration_ms(size) / 1000


def encoded_audio(audio: bytes) -> str:
    """Bytes of reply audio as the ``delta`` of ``response.output_audio.delta`` (base64)."""
    return base64.b64encode(audio).decode("ascii")


class EventAudioSession(RealtimeSession):
    """The Realtime session of a transport that carries audio in its events (WebSocket): the same
    protocol as over WebRTC, except that

    - ``input_audio_buffer.append`` hands its base64 audio to ``audio_input`` with the session's input
      format, to be decoded off the event loop; problems are an ``error`` naming ``audio``, the
      session goes on. A commit or clear keeps its place after the appends before it;
    - the audio is metered (``audio_intake``, :class:`~gateway.realtime.audio_intake.AudioIntake`:
      the session's audio budget and what waits to be decoded): audio beyond it is dropped before
      it is decoded, with one ``rate_limit_exceeded`` error per flood. An append too large for it
      is refused by its length alone, before it is parsed (:meth:`handle_client_message`);
    - reply audio goes out as ``response.output_audio.delta`` (:meth:`send_output_audio`);
    - the WebRTC-only ``output_audio_buffer.*`` server events are not sent, and the client event
      ``output_audio_buffer.clear`` is refused (``unsupported_event``, the reply goes on);
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
        self.audio_intake = AudioIntake(
            lambda: audio_input.pending_s,
            tell=lambda text: self.send_error(text, code=RATE_LIMIT_CODE, error_type=RATE_LIMIT_TYPE),
        )

    # ----- caller audio in -----
    def handle_client_message(self, raw: str | bytes) -> None:
        """As for RealtimeSession, except that an append too large for the audio the session may
        take now is refused by its length, unparsed (``AudioIntake.refused_unread``). A message
        over ``max_message_bytes`` gets its own error (``message_too_large``), also unparsed."""
        fmt = AudioFormat.from_session(self.settings.input_format)
        if not self.closed and len(raw) <= self.max_message_bytes and self.audio_intake.refused_unread(raw, fmt):
            return
        super().handle_client_message(raw)

    def _on_input_audio_buffer_append(self, event: dict, event_id: Optional[str]) -> None:
        audio = appended_audio(event)
        seconds = appended_seconds(audio, AudioFormat.from_session(self.settings.input_format))
        if not self.audio_intake.take(seconds):
            return

        def refused(reason: str) -> None:
            if not self.closed:
                message = f"Invalid value for 'audio': {reason}."
                self.send_error(message, code="invalid_value", param="audio", event_id=event_id)

        self._audio_input.append(audio, self.settings.input_format, refused)

    def _on_input_audio_buffer_commit(self, event: dict, event_id: Optional[str]) -> None:
        commit = super()._on_input_audio_buffer_commit  # after the appends before it, all of them
        self._audio_input.then(lambda: None if self.closed else commit(event, event_id), flush=True)

    def _on_input_audio_buffer_clear(self, event: dict, event_id: Optional[str]) -> None:
        clear = super()._on_input_audio_buffer_clear  # after the appends before it
        self._audio_input.then(lambda: None if self.closed else clear(event, event_id))

    def _on_output_audio_buffer_clear(self, event: dict, event_id: Optional[str]) -> None:
        # OpenAI: output_audio_buffer.clear is a WebRTC/SIP client event (the server plays the audio
        # there). Over a WebSocket the client plays it: refused, as append is over WebRTC, and the
        # reply goes on (it was cancelled silently before).
        raise ClientError(
            "output_audio_buffer.clear is not supported over a WebSocket: the client plays the reply audio; "
            "stop playing it, then send response.cancel (and conversation.item.truncate).",
            "unsupported_event",
            "type",
        )

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
