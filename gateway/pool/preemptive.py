"""One unit's preemptive reply: a reply started from the speculative transcript at the caller's
pause, while the end of the turn is decided, held unplayed until the turn is confirmed.

``PipelineControl.read_ahead`` (the caller paused; the session says what the reply's request
would be) starts it, when the call's ``preemptive_reply`` is on, nothing else of the call is
generating or playing, and the shared LLM has a free turn (else it is ``skipped`` and only the
prompt is read ahead): a new generation id of the call's :class:`~gateway.pipeline.cancel.CancelScope`,
its request marked with a :class:`~gateway.pipeline.preemption.ReplyHold` (no deadline at the shared
models), its audio held in the playout buffer, its events kept here.

- **used**: the turn's response asks for the same request (the same prompt, the caller's words
  compared normalised: case, punctuation and spacing aside): the held reply becomes that response
  (:meth:`PreemptiveReplies.take`), its kept events go to the session after the response's own
  first events, its audio plays at once, its generation goes on at the due times of any reply.
- **discarded**: the caller spoke on (``SpeechResumed``), a newer draft came, it gave way to
  another caller's turn waiting for the LLM (``ReplyHold.gives_way``), the response asks
  for something else, the turn ended with no response, a barge-in or cancel, the end of the call:
  its generation id is cancelled (its late tokens and audio are dropped, as a barge-in's are), its
  audio dropped unheard, its kept events and any later ones of its generation never reach the
  session, so the client sees no trace of it and the conversation holds only the real reply.

The unit (``gateway.pool.unit.PipelineUnit``) owns one :class:`PreemptiveReplies` and hands it
its cancel scope and playout buffer (:meth:`~PreemptiveReplies.begin`, :meth:`~PreemptiveReplies.adopt`,
:meth:`~PreemptiveReplies.discard`); it queues the reply on its LLM stage and hands on the kept
events itself. This module imports nothing of the unit.

Thread use: the event loop, except :meth:`PreemptiveReplies.drop` and
:meth:`PreemptiveReplies.discard`, which a stage thread may call (a barge-in on the VAD thread);
the state swaps under a lock.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from gateway.media.playout import PlayoutBuffer
from gateway.models.base import ChatMessage
from gateway.pipeline.cancel import CancelScope
from gateway.pipeline.events import PipelineEvent
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.preemption import ReplyHold

OUTCOMES = ("used", "discarded", "skipped")
_NOT_WORDS = re.compile(r"[^\w']+")


def normalised(request: tuple[Any, ...]) -> tuple[Any, ...]:
    """A request key (messages, max_tokens, options) with each user message's words normalised:
    lower case, punctuation and spacing aside (Whisper's "Hello, world." and "hello world")."""
    messages: list[ChatMessage] = request[0]
    words = [
        replace(m, content=" ".join(_NOT_WORDS.sub(" ", m.content.lower()).split())) if m.role == "user" else m
        for m in messages
    ]
    return (words, *request[1:])


def speaking(audio: bool, voice: Optional[str], speed: float) -> tuple[Any, ...]:
    """How a reply speaks, as a held one must match the turn's: () text only, else its TTS
    ``voice`` and ``speed`` (a ``session.update`` of either while a reply is held: the turn's
    response speaks as the update says, the held one is not used)."""
    return (voice, speed) if audio else ()


@dataclass
class HeldReply:
    """A preemptive reply: its ``generation``, the ``request`` key it answers (normalised) and
    how it ``speaks`` (:func:`speaking`), its ``hold`` and ``latency`` (the stages mark it), and the
    ``events`` of its generation kept until it is used (None once they were handed on)."""

    generation: int
    request: tuple[Any, ...]
    speaks: tuple[Any, ...]
    hold: ReplyHold
    latency: TurnLatency
    events: Optional[list[PipelineEvent]] = field(default_factory=list)

    def timed_with(self, turn: Optional[TurnLatency], now: float) -> TurnLatency:
        """The turn's response (asked at ``now``, monotonic s) is this reply: its latency takes the
        turn's own points (speech end, end of turn, transcript). Returns the latency the response
        is timed by."""
        for name in ("speech_end", "end_of_turn", "stt_done"):
            when = getattr(turn, name, None)
            if when is not None:
                self.latency.mark(name, when)
        self.latency.mark("response_requested", now)
        return self.latency


class PreemptiveReplies:
    """The held reply of one unit (at most one) and the outcome counts of its replies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held: Optional[HeldReply] = None
        self._releasing: Optional[HeldReply] = None  # used; its kept events not yet handed on
        self._dropped: set[int] = set()  # generations discarded in this call: their events go nowhere
        self.last_discarded: Optional[HeldReply] = None  # what the newest discarded reply had made (logs, tests)
        self._counts = dict.fromkeys(OUTCOMES, 0)

    def counts(self) -> dict[str, int]:
        """``{"used", "discarded", "skipped"}``: preemptive replies of this unit so far (all calls)."""
        with self._lock:
            return dict(self._counts)

    def count(self, outcome: str) -> None:
        with self._lock:
            self._counts[outcome] += 1

    def start(self, reply: HeldReply) -> None:
        """``reply`` is held now (any earlier one must have been dropped)."""
        with self._lock:
            self.held = reply

    def begin(
        self, scope: CancelScope, playout: PlayoutBuffer, queue: Any, request: tuple[Any, ...], speaks: tuple[Any, ...]
    ) -> Optional[HeldReply]:
        """Start a preemptive reply to ``request`` (a request key: messages, max_tokens, options; not
        normalised) that ``speaks`` so (:func:`speaking`) as a new generation of ``scope``, its
        audio held in ``playout``, and return it (the unit queues it on its LLM stage). None,
        counted ``skipped``, when a reply of the call still generates or plays, or the shared LLM's
        ``queue`` (None: an engine without one) has no free turn. Event loop."""
        if scope.live or playout.holds(scope.current) or (queue and queue.load().saturated):
            self.count("skipped")
            return None
        generation = scope.begin()
        hold = ReplyHold(lambda: queue is not None and queue.waiting > 0)
        playout.hold(generation)
        reply = HeldReply(generation, normalised(request), speaks, hold, TurnLatency())
        self.start(reply)
        return reply

    def adopt(
        self, scope: CancelScope, playout: PlayoutBuffer, request: tuple[Any, ...], speaks: tuple[Any, ...], now: float
    ) -> Optional[HeldReply]:
        """The turn's response asks for ``request``, spoken so (:func:`speaking`), at ``now``
        (monotonic s): the held reply if it answers it (:meth:`take`: used; the unit releases its
        audio and kept events), else None and any held reply is discarded (:meth:`discard`). Event
        loop."""
        held = self.take(request, speaks, now)
        if held is None:
            self.discard(scope, playout)
        return held

    def discard(self, scope: CancelScope, playout: PlayoutBuffer) -> None:
        """Discard the held reply, if any: its generation of ``scope`` is cancelled (late output
        dropped), its audio dropped unheard from ``playout``; nothing of it reaches the session.
        Any thread."""
        held = self.drop()
        if held is None:
            return
        if scope.is_current(held.generation):
            scope.cancel()
        playout.drop(held.generation)

    def take(self, request: tuple[Any, ...], speaks: tuple[Any, ...], now: float) -> Optional[HeldReply]:
        """The held reply if it answers ``request`` (its key, not normalised), speaks as the turn's
        response would (``speaks``: :func:`speaking`) and had not given way: it is used, adopted at
        ``now`` (monotonic s; its events are kept until :meth:`release_events`); else None."""
        with self._lock:
            held = self.held
            if held is None or held.speaks != speaks or held.request != normalised(request):
                return None
            if not held.hold.adopt(now):  # it gave way to another caller: discarded
                return None
            self.held, self._releasing = None, held
            self._counts["used"] += 1
            return held

    def drop(self) -> Optional[HeldReply]:
        """Discard the held reply, if any, and return it (its generation's events go nowhere from now on)."""
        with self._lock:
            held, self.held = self.held, None
            if held is not None:
                self._dropped.add(held.generation)
                self._counts["discarded"] += 1
                self.last_discarded = held
            return held

    def keep(self, event: PipelineEvent) -> bool:
        """On the event loop, before ``event`` goes to the session: True when it is kept here (an
        event of the held reply, or of a used one whose kept events are not handed on yet) or
        swallowed (one of a discarded reply); False when it goes on as usual."""
        generation = getattr(event, "generation", None)
        if generation is None:
            return False
        for reply in (self.held, self._releasing):
            if reply is not None and reply.generation == generation and reply.events is not None:
                reply.events.append(event)
                return True
        return generation in self._dropped

    def release_events(self) -> list[PipelineEvent]:
        """The used reply's kept events, in order, once; later events of it go on as usual."""
        reply, self._releasing = self._releasing, None
        if reply is None or reply.events is None:
            return []
        events, reply.events = reply.events, None
        return events

    def new_call(self) -> None:
        """A new call: nothing of an earlier call's replies is held or remembered."""
        with self._lock:
            self.held = self._releasing = None
            self._dropped.clear()
