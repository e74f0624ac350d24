"""What caller audio a session that carries audio in its events (the WebSocket transport) takes,
and how fast: audio costs what real time costs.

A session may append ``AUDIO_BURST_S`` of audio at once, then ``AUDIO_REFILL_PER_S`` seconds of
audio a second (:class:`AudioBudget`, a token bucket counting seconds of audio), and may have at
most ``MAX_PENDING_S`` appended but not yet decoded (decoding runs off the event loop). Audio beyond
either is dropped before it is decoded, with one ``rate_limit_exceeded`` error (type
``rate_limit_error``, OpenAI's code and type for a rate limit) per flood, as the client event rate
does (``gateway.realtime.client_messages.ClientEventRate``); the session goes on.

An append's duration follows from its base64 length and the session's input format, so metering
it costs the event loop nothing in proportion to its size; an append too large to be taken is
refused by the message's length alone, before it is parsed (:meth:`AudioIntake.refused_unread`).

Reference: OpenAI Realtime API, ``input_audio_buffer.append`` (up to 15 MiB of audio an event;
this gateway takes at most ``MAX_EVENT_MESSAGE_BYTES`` a message, and the budget's burst of audio).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from gateway.media.audio_format import AudioFormat
from gateway.realtime.client_messages import ClientEventRate, RateVerdict

log = logging.getLogger(__name__)

# AUDIO_BURST_S of audio at once: a short question recorded beforehand and sent in one append (most
# are under 10 s) fits with room to spare. Then AUDIO_REFILL_PER_S s of audio a second, 4x real time:
# a client streaming at real time never comes near it, one catching up after a network stall
# gains 3 s a second, and no client makes its call cost more than a few callers' audio.
AUDIO_BURST_S = 20.0
AUDIO_REFILL_PER_S = 4.0
# Appended audio not yet decoded that a session may have waiting, s.
MAX_PENDING_S = AUDIO_BURST_S
# What an append's other fields (type, event_id, the JSON around them) may take, bytes: a longer
# message is judged by its length before it is parsed, 90 % of the rest taken as audio (base64
# with ``\/`` escapes is a little longer than its audio).
APPEND_ENVELOPE_BYTES = 4096
_APPEND_TYPE = '"input_audio_buffer.append"'


class AudioBudget(ClientEventRate):
    """The seconds of audio one session may append: ``AUDIO_BURST_S`` at once, then
    ``AUDIO_REFILL_PER_S`` a second. ``clock``: monotonic seconds (tests pass a fake)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(per_second=AUDIO_REFILL_PER_S, burst=AUDIO_BURST_S, tell_every_s=10.0, clock=clock)

    def message(self) -> str:
        """The text of the flood's error."""
        return (
            f"Audio appended faster than this gateway takes it: at most {self.burst:g} s of audio at once "
            f"(in one append or several), then {self.per_second:g} s of audio a second; the audio beyond "
            "that is dropped."
        )


def looks_like_append(raw: str | bytes) -> bool:
    """True when a message names ``input_audio_buffer.append`` in its first or last 256 characters
    (where its ``type`` is, before or after the audio), without reading the rest."""
    if isinstance(raw, bytes):
        needle = _APPEND_TYPE.encode()
        return needle in raw[:256] or needle in raw[-256:]
    return _APPEND_TYPE in raw[:256] or _APPEND_TYPE in raw[-256:]


class AudioIntake:
    """The audio one session takes: its :class:`AudioBudget` (``budget``) and room for audio
    waiting to be decoded (``pending_s()``: seconds appended, not yet decoded). A refusal calls
    ``tell(message)`` once per flood (the session sends it as a ``rate_limit_exceeded`` error)."""

    def __init__(
        self,
        pending_s: Callable[[], float],
        tell: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budget = AudioBudget(clock)
        self._pending_s = pending_s
        self._tell = tell

    def room_s(self) -> float:
        """Seconds of audio the session may append now."""
        return min(self.budget.available(), MAX_PENDING_S - self._pending_s())

    def take(self, seconds: float) -> bool:
        """True, and ``seconds`` taken from the budget, when an append of that much audio fits;
        else False (dropped: the client is told once per flood)."""
        if seconds > self.room_s():
            self._refuse()
            return False
        self.budget.admit(seconds)
        return True

    def refused_unread(self, raw: str | bytes, fmt: AudioFormat) -> bool:
        """True (dropped: the client is told once per flood) when ``raw``, a client message not
        parsed yet, is an append (:func:`looks_like_append`) whose length alone shows more audio of
        ``fmt`` than :meth:`room_s`; False for any other message, to be parsed as usual."""
        size = len(raw)  # characters: no more than its UTF-8 bytes
        if size <= APPEND_ENVELOPE_BYTES or not looks_like_append(raw):
            return False
        least_bytes = (size - APPEND_ENVELOPE_BYTES) * 9 // 10 * 3 // 4
        if fmt.duration_ms(least_bytes) / 1000 <= self.room_s():
            return False
        self._refuse()
        return True

    def _refuse(self) -> None:
        if self.budget.refuse() is RateVerdict.REFUSE_AND_TELL:
            log.warning("audio appended faster than the session's budget: dropping audio")
            self._tell(self.budget.message())
