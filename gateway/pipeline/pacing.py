"""A reply's pace: when its next token is due, from when its audio will have played out.

A caller hears a reply at speaking rate (Piper's joe: ~3.4 words/s at speed 1.0, measured on this
project's own sentences), far slower than the LLM writes it, so a reply needs its first clause at
once and every later word only just before the caller would hear silence. :class:`ReplyPace`
follows one response: the LLM stage tells it each piece of text it sends to TTS
(:meth:`ReplyPace.spoken`), and the engine asks :meth:`ReplyPace.due` before each token
(``GenerationOptions.due``; ``gateway.models.compute.deadline`` says what the engine does with it).

Until the first piece is out the reply is due when it was asked (first clauses are served in the
order their turns came). After it, the words sent so far play out until
``start + words / rate``, where ``start`` is the reply's first audio frame (or, before it plays,
the first piece's time plus :data:`FIRST_AUDIO_S`); the next token is due :data:`LEAD_S` before
that: time to write the rest of a sentence on a loaded box and synthesize it. A reply whose audio
ran dry (a deadline missed) makes its next tokens due at once, and they are late only by so much.
A preemptive reply (``gateway.pipeline.preemption``) has no deadline while it is held, and is due
from when its response adopted it.
"""

from __future__ import annotations

import time
from typing import Optional

from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.preemption import ReplyHold

SPEAKING_WORDS_PER_S = 3.4  # spoken words per second of reply audio at speed 1.0 (Piper joe)
LEAD_S = 2.5  # the next words are due this long before the audio already written runs out, s
FIRST_AUDIO_S = 0.5  # from the first piece of text to its first audio, before that is known, s


class ReplyPace:
    """The pace of one response; ``speed`` is its ``audio.output.speed`` (1.0 normal).

    Thread use: :meth:`spoken` and :meth:`due` on the LLM stage's thread; ``latency`` (the turn's
    timestamps) is marked by the other stages and read here. ``hold``: a preemptive reply's."""

    def __init__(
        self,
        latency: TurnLatency,
        speed: float = 1.0,
        asked_at: Optional[float] = None,
        hold: Optional[ReplyHold] = None,
    ) -> None:
        self._latency = latency
        self._hold = hold
        self._rate = SPEAKING_WORDS_PER_S * max(0.25, speed)
        self.asked_at = asked_at or latency.response_requested or time.monotonic()
        self.words = 0
        self._first_piece_at: Optional[float] = None

    def spoken(self, words: int, now: Optional[float] = None) -> None:
        """A piece of ``words`` words went to TTS (at ``now``, monotonic s)."""
        if self._first_piece_at is None:
            self._first_piece_at = time.monotonic() if now is None else now
        self.words += words

    def heard_until(self) -> Optional[float]:
        """When the audio of the words sent so far will have played (monotonic s); None before the
        first piece."""
        if self._first_piece_at is None:
            return None
        start = self._latency.first_audio_frame or self._first_piece_at + FIRST_AUDIO_S
        return start + self.words / self._rate

    def due(self) -> float:
        """When the reply's next token is needed (monotonic s; see the module docstring). The
        engine's first ask (its prompt's read starting) is the turn's ``llm_started``."""
        if self._latency.llm_started is None:
            self._latency.mark("llm_started", time.monotonic())
        hold = self._hold
        until = self.heard_until()
        if hold is None:
            return self.asked_at if until is None else until - LEAD_S
        if until is None:
            return hold.due(hold.asked_at or self.asked_at)
        return hold.due(until - LEAD_S)
