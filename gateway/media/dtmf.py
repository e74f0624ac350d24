"""DTMF key presses from RFC 4733 ``telephone-event`` RTP payloads.

RFC 4733 (2.3, 2.5): a key press is one *event*: every packet of it carries the same RTP
timestamp (the event's start) and a growing duration; its last packet has the E (end) bit set and
is sent three times. A long event may be cut into segments, each starting where the last one ended
(2.5.1.3). Events 0..15 are the DTMF digits ``0-9 * # A-D`` (3.2); others (flash, tones) are not
key presses. So: one key press per (SSRC, timestamp), whatever the number of packets.

Payload (2.3): ``event`` (8 bits) | ``E`` (1) | ``R`` (1) | ``volume`` (6) | ``duration`` (16).
"""

from __future__ import annotations

import collections
import struct
from dataclasses import dataclass
from typing import Optional

# DTMF events 0..15 (RFC 4733 3.2, table 7).
DTMF_DIGITS = "0123456789*#ABCD"
# Events remembered per stream (SSRC), to recognise the repeated packets of recent key presses.
_REMEMBERED_EVENTS = 16
_REMEMBERED_SSRCS = 4  # a call has one sender; a flood of SSRCs only fills the memory


@dataclass(frozen=True)
class TelephoneEvent:
    """One RFC 4733 event block: ``event`` 0..255, ``end`` (the E bit), ``volume`` (0..63, in
    -dBm0), ``duration`` (in RTP timestamp units since the event's start)."""

    event: int
    end: bool
    volume: int
    duration: int

    @property
    def digit(self) -> Optional[str]:
        """The DTMF digit (``"0"``..``"9"``, ``"*"``, ``"#"``, ``"A"``..``"D"``), None for other events."""
        return DTMF_DIGITS[self.event] if self.event < len(DTMF_DIGITS) else None


def parse_telephone_event(payload: bytes) -> TelephoneEvent:
    """The first event block of an RFC 4733 payload (a sender may append redundant older blocks:
    ignored). Raises ValueError for a payload under 4 bytes."""
    if len(payload) < 4:
        raise ValueError(f"telephone-event payload of {len(payload)} bytes (at least 4, RFC 4733 2.3)")
    event, flags, duration = struct.unpack("!BBH", payload[:4])
    return TelephoneEvent(event=event, end=bool(flags & 0x80), volume=flags & 0x3F, duration=duration)


@dataclass(frozen=True)
class KeyPress:
    """A DTMF key press: ``digit`` as in :attr:`TelephoneEvent.digit`; ``timestamp`` the RTP
    timestamp of its event; ``clock_rate`` of that timestamp (Hz)."""

    digit: str
    timestamp: int
    clock_rate: int


@dataclass
class _Event:
    timestamp: int
    event: int
    duration: int
    ended: bool


class KeyPressDetector:
    """Turns the ``telephone-event`` packets of one call into key presses, one per event.

    A key press is reported by the first packet of its event seen (start, update or end: a lost
    start still counts once), so that barge-in on a key press is not delayed to its end. Later
    packets of the same (SSRC, timestamp), and the next segment of a long event, report nothing.
    Not thread-safe: feed it from one thread (aiortc's receive path, on the event loop).
    """

    def __init__(self) -> None:
        self._recent: dict[int, collections.deque[_Event]] = {}  # per SSRC (the last few), newest last
        self.packets = 0  # telephone-event packets seen
        self.malformed = 0  # of which too short to read

    def packet(self, ssrc: int, timestamp: int, payload: bytes, clock_rate: int) -> Optional[KeyPress]:
        """One RTP packet of the telephone-event payload type (its SSRC, RTP timestamp and
        payload, the payload type's clock rate in Hz). Returns the new key press, else None."""
        self.packets += 1
        try:
            block = parse_telephone_event(payload)
        except ValueError:
            self.malformed += 1
            return None
        recent = self._recent.get(ssrc)
        if recent is None:
            if len(self._recent) >= _REMEMBERED_SSRCS:
                del self._recent[next(iter(self._recent))]  # the oldest SSRC seen
            recent = self._recent[ssrc] = collections.deque(maxlen=_REMEMBERED_EVENTS)
        for seen in recent:
            if seen.timestamp == timestamp:
                seen.duration = max(seen.duration, block.duration)
                seen.ended = seen.ended or block.end
                return None
        last = recent[-1] if recent else None
        segment = (
            last is not None
            and not last.ended
            and last.event == block.event
            and timestamp == (last.timestamp + last.duration) & 0xFFFFFFFF
        )
        recent.append(_Event(timestamp, block.event, block.duration, block.end))
        if segment or block.digit is None:
            return None
        return KeyPress(digit=block.digit, timestamp=timestamp, clock_rate=clock_rate)
