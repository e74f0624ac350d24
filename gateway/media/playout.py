"""The reply audio waiting to be played: written by the TTS thread, read by the output track."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy as np

SAMPLE_RATE = 48000
# How long the words of played reply audio are kept (:meth:`PlayoutBuffer.words_played_since`), s.
SPOKEN_HISTORY_S = 10.0
# How often a writer waiting while playback is suspended looks again (a cancel does not notify), s.
_SUSPENDED_POLL_S = 0.5


class ReadAhead(Protocol):
    """A reader that takes audio out of the buffer before the caller hears it (the WebSocket
    transport's pacer, ``gateway.media.audio_pacer``), so that a clear can tell what was heard."""

    def take_unheard(self) -> int:
        """Samples read but not heard yet, which the caller now drops (called under the lock)."""


@dataclass
class _Entry:
    generation: int
    samples: np.ndarray  # int16 mono 48 kHz; empty for an end marker
    words: list[str] = field(default_factory=list)  # text of these samples, spread evenly over them
    end: bool = False  # end-of-response marker
    offset: int = 0  # samples already played

    @property
    def heard_words(self) -> list[str]:
        if not self.samples.size:
            return []
        return self.words[: int(len(self.words) * self.offset / self.samples.size)]


@dataclass
class PlayoutEvents:
    """What happened while one frame was read (for the track to report)."""

    started: Optional[int] = None  # generation whose first audio is in this frame
    stopped: Optional[tuple[int, int]] = None  # (generation, played_ms) played to its end


class PlayoutBuffer:
    """A bounded FIFO of reply audio, tagged by generation.

    ``write`` blocks while more than ``capacity_ms`` is buffered (back-pressure from the track to
    TTS): the buffer holds at most that plus the sentence being queued, and ``clear`` drops it all
    at once on barge-in. Audio of a generation that ``is_current`` no longer accepts is dropped at
    write and at read time, so late output of a cancelled response is never played.
    """

    def __init__(
        self, is_current: Callable[[int], bool], capacity_ms: int = 400, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._is_current = is_current
        self._clock = clock
        self._spoken: deque[tuple[float, str]] = deque()  # (when its piece began to play, word), oldest first
        self._capacity = int(SAMPLE_RATE * capacity_ms / 1000)
        self._entries: deque[_Entry] = deque()
        self._buffered = 0
        self._cond = threading.Condition()
        self._playing: Optional[int] = None  # generation whose audio is leaving the track
        self._played: dict[int, int] = {}  # samples played per generation
        self._heard: dict[int, list[str]] = {}
        self._closed = False
        self._paused = False  # barge-in under decision: the reader gets silence, nothing is dropped
        self._held: Optional[int] = None  # a preemptive reply's generation: queued, not played yet
        self._suspended = False  # the caller cannot hear (a SIP hold): reads take nothing, writes wait
        # Deadline misses: a response that plays and is not at its end, with no audio for a frame.
        self.underruns = 0  # times its audio ran dry (each gap once)
        self.underrun_samples = 0  # samples of silence read inside responses so far
        self._starving = False
        # The reader, when it reads ahead of what the caller hears; None: what was read was heard
        # (the WebRTC track reads in real time).
        self.read_ahead: Optional[ReadAhead] = None

    # --- writer side (TTS thread) ---
    def write(self, generation: int, samples: np.ndarray, text: str = "", timeout: float = 30.0) -> bool:
        """Queue int16 48 kHz mono ``samples`` (one synthesized sentence); False (nothing queued)
        once the generation is stale, the buffer is closed, or ``timeout`` s pass without room.

        Blocks while more than ``capacity_ms`` is buffered, then queues the whole sentence at once:
        the TTS thread synthesizes the next sentence while this one plays, so sentences follow
        each other without a gap, and the buffer holds at most capacity + one sentence. While
        playback is :meth:`suspend`-ed (a call on hold, minutes maybe) the wait has no timeout:
        ``timeout`` counts again from the resume.
        """
        words = text.split()
        step = SAMPLE_RATE // 10  # 100 ms pieces: the granularity of "what the caller heard"
        pieces = max(1, -(-samples.size // step))
        with self._cond:
            if not self._room(generation, timeout):
                return False
            for index in range(pieces):
                part = samples[index * step : (index + 1) * step]
                share = words[len(words) * index // pieces : len(words) * (index + 1) // pieces]
                self._entries.append(_Entry(generation, part, share))
                self._buffered += part.size
        return True

    def _room(self, generation: int, timeout: float) -> bool:
        """Wait (the lock held) until ``generation`` may queue audio: True when there is room for
        it, False once it is stale, the buffer closed, or ``timeout`` s passed without room while
        playback was not suspended."""
        remaining = timeout
        while not (self._closed or not self._is_current(generation) or self._buffered <= self._capacity):
            if self._suspended:
                self._cond.wait(_SUSPENDED_POLL_S)  # a cancel makes it stale without a notify
                remaining = timeout
                continue
            if remaining <= 0:
                break
            started = time.monotonic()
            self._cond.wait(remaining)
            remaining -= time.monotonic() - started
        return not self._closed and self._is_current(generation) and self._buffered <= self._capacity

    def end(self, generation: int) -> None:
        """Mark the end of a response; the track reports it once the audio before it has played."""
        with self._cond:
            self._entries.append(_Entry(generation, np.zeros(0, np.int16), end=True))

    # --- reader side (track, event loop) ---
    def read_frame(self, samples: int) -> tuple[Optional[np.ndarray], PlayoutEvents]:
        """Up to ``samples`` of current audio, zero-padded; None when there is nothing to play."""
        events = PlayoutEvents()
        out: list[np.ndarray] = []
        need = samples
        with self._cond:
            while self._entries and need > 0 and not self._paused and not self._suspended:
                entry = self._entries[0]
                if not self._is_current(entry.generation):
                    self._pop()
                    continue
                if entry.generation == self._held:
                    break  # a preemptive reply waits for its turn to be confirmed
                if entry.end:
                    self._pop()
                    if self._playing == entry.generation or entry.generation in self._played:
                        events.stopped = (entry.generation, self._played_ms(entry.generation))
                        self._forget(entry.generation)
                    break  # the end marker closes this frame; the next response starts a new one
                if self._playing != entry.generation:
                    self._playing = entry.generation
                    events.started = entry.generation
                if entry.offset == 0 and entry.words:
                    self._note_spoken(entry.words)
                take = entry.samples[entry.offset : entry.offset + need]
                entry.offset += take.size
                self._buffered -= take.size
                need -= take.size
                out.append(take)
                self._played[entry.generation] = self._played.get(entry.generation, 0) + take.size
                if entry.offset >= entry.samples.size:
                    self._heard.setdefault(entry.generation, []).extend(entry.words)
                    self._pop()
            self._count_starving(need)
            self._cond.notify_all()
        if not out:
            return None, events
        frame = np.concatenate(out)
        if frame.size < samples:
            frame = np.concatenate([frame, np.zeros(samples - frame.size, np.int16)])
        return frame, events

    def _note_spoken(self, words: list[str]) -> None:
        """A piece with ``words`` begins to play (the lock held): remember them with the time."""
        now = self._clock()
        self._spoken.extend((now, word) for word in words)
        while self._spoken and self._spoken[0][0] < now - SPOKEN_HISTORY_S:
            self._spoken.popleft()

    def words_played_since(self, since: float) -> list[str]:
        """The words of the reply audio that began to play at or after ``since`` (monotonic s; the
        last :data:`SPOKEN_HISTORY_S`, any response), in order: what the caller's microphone may
        pick up as echo. 100 ms granularity (a sentence's words are spread evenly over its audio)."""
        with self._cond:
            return [word for when, word in self._spoken if when >= since]

    def _count_starving(self, missing: int) -> None:
        """After a frame read with ``missing`` samples short (the lock held): whether the response
        that plays ran dry (a frame, or its end, without audio while it is neither paused nor at its
        end marker)."""
        playing = self._playing
        starving = (
            missing > 0
            and playing is not None
            and not self._paused
            and not self._suspended
            and not self._entries
            and self._is_current(playing)
        )
        if starving and not self._starving:
            self.underruns += 1
        if starving:
            self.underrun_samples += missing
        self._starving = starving

    def pause(self) -> bool:
        """Hold playback where it is (barge-in being decided): reads return silence, the queued
        audio and what was heard stay. True when a current response's audio was playing (or is
        paused already); False, and nothing paused, when none was (between responses)."""
        with self._cond:
            playing = self._playing is not None and self._is_current(self._playing)
            if playing:
                self._paused = True
            return playing

    def resume(self) -> None:
        """Play on from where :meth:`pause` held it (nothing if not paused)."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def suspend(self, on: bool) -> None:
        """Suspend playback while the caller cannot hear it (``on``: a SIP hold), or play on
        (``on`` False). While suspended, reads take nothing (the reader keeps its clock and sends
        silence, or nothing): the reply stops where it was, nothing of it is dropped or counted as
        played or heard, its end is not reached (no playback event), a newer response's audio
        waits too, and a writer waits for room without its timeout. Independent of
        :meth:`pause` (barge-in), which a resume from the hold does not undo."""
        with self._cond:
            self._suspended = on
            self._starving = False
            self._cond.notify_all()

    @property
    def suspended(self) -> bool:
        """True while :meth:`suspend` holds playback."""
        with self._cond:
            return self._suspended

    def hold(self, generation: int) -> None:
        """Queue the audio of ``generation`` (a preemptive reply) without playing it: reads return
        nothing from it, and it starts nothing, until :meth:`release` (or :meth:`drop`)."""
        with self._cond:
            self._held = generation

    def release(self, generation: int) -> None:
        """Play ``generation``'s held audio from now on (its response adopted it)."""
        with self._cond:
            if self._held == generation:
                self._held = None
            self._cond.notify_all()

    def drop(self, generation: int) -> None:
        """Throw away every queued piece of ``generation`` (a discarded preemptive reply, never
        heard) and its hold, reporting nothing; a writer blocked on it wakes."""
        with self._cond:
            kept = [e for e in self._entries if e.generation != generation]
            self._buffered -= sum(e.samples.size - e.offset for e in self._entries if e.generation == generation)
            self._entries = deque(kept)
            if self._held == generation:
                self._held = None
            self._cond.notify_all()

    @property
    def paused(self) -> bool:
        """True while :meth:`pause` holds playback."""
        with self._cond:
            return self._paused

    def holds(self, generation: int) -> bool:
        """True while audio of ``generation`` waits to be read and it is current."""
        with self._cond:
            return self._is_current(generation) and any(e.generation == generation and not e.end for e in self._entries)

    def clear(self) -> Optional[tuple[int, int, str]]:
        """Drop all queued audio at once. Returns (generation, played_ms, heard_text) of the response
        that was playing or queued, or None if there was none. With a ``read_ahead`` reader, what it
        read but the caller did not hear yet is not counted as played (the words in proportion)."""
        with self._cond:
            unheard = self.read_ahead.take_unheard() if self.read_ahead is not None else 0
            generation = self._playing
            if generation is None and self._entries:
                generation = self._entries[0].generation
            partial = self._entries[0] if self._entries and self._entries[0].generation == generation else None
            heard = list(self._heard.get(generation, [])) if generation is not None else []
            if partial is not None and not partial.end:
                heard += partial.heard_words
            had_audio = any(not e.end for e in self._entries)
            self._paused = False
            self._entries.clear()
            self._buffered = 0
            self._cond.notify_all()
            if generation is None or (not had_audio and generation != self._playing):
                return None
            played = self._played.get(generation, 0)
            unheard = min(unheard, played)
            if unheard:
                heard = heard[: len(heard) * (played - unheard) // played]
            self._forget(generation)
            return generation, int((played - unheard) * 1000 / SAMPLE_RATE), " ".join(heard)

    def close(self) -> None:
        """Wake and refuse any writer (the unit is being rebuilt)."""
        with self._cond:
            self._closed = True
            self._paused = False
            self._suspended = False
            self._entries.clear()
            self._buffered = 0
            self._cond.notify_all()

    @property
    def buffered_ms(self) -> float:
        """Reply audio queued but not yet read by the track, in ms (thread-safe). This is what a
        barge-in throws away; at most ``capacity_ms`` plus one sentence. Shown as ``playout_ms`` in /v1/pool."""
        with self._cond:
            return self._buffered * 1000 / SAMPLE_RATE

    def _pop(self) -> None:
        entry = self._entries.popleft()
        self._buffered -= entry.samples.size - entry.offset  # what was never read

    def _played_ms(self, generation: int) -> int:
        return int(self._played.get(generation, 0) * 1000 / SAMPLE_RATE)

    def _forget(self, generation: int) -> None:
        self._played.pop(generation, None)
        self._heard.pop(generation, None)
        if self._playing == generation:
            self._playing = None
