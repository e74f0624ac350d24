"""The held turn of the VAD stage: speech under the reply's audio, held until its words decide.

A turn that starts while reply audio plays pauses the reply and is held (no SpeechStarted) while
the :class:`~gateway.pipeline.bargein.BargeInDecider` hears its probes (the held speech so far,
transcribed by STT and handed back): interrupt (the held events go out as they happened, the unit
cancels the reply), resume (the reply plays on, the turn is dropped), probe again, or pause again.
A second part said before the decision joins the held turn. ``gateway.pipeline.vad`` finds the
turns; this is its half that carries out the decisions (:class:`HeldTurnStage`, its base class).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Optional

import numpy as np

from gateway.pipeline.bargein import PROBE_PREFIX_MS, Action, BargeInDecider
from gateway.pipeline.events import BargeInDecided, InputCommitted, SpeechStarted, SpeechStopped
from gateway.pipeline.messages import BargeInHeard, Utterance
from gateway.pipeline.stage import Stage
from gateway.pipeline.standing_cut import StandingCut
from gateway.pipeline.turn import TurnDetection

log = logging.getLogger("gateway.pipeline.vad")


class HeldTurnStage(Stage):
    """The held-turn methods of :class:`~gateway.pipeline.vad.VadStage`, which sets every
    attribute declared here and gives :meth:`_begin_speech` and :meth:`_take_turn`. VAD stage
    thread only. Counters: ``backchannels`` (held turns dropped), ``joined_parts`` (speech that
    joined a held turn the VAD had ended at a pause, before its decision), ``speculations``."""

    _barge: BargeInDecider
    _rate: int
    _call: str
    _position: int  # samples of input seen this call
    _utterance: list[np.ndarray]
    _candidate_start: int
    _held_start: Optional[SpeechStarted]  # the held turn's SpeechStarted
    _held_end: Optional[tuple[SpeechStopped, InputCommitted, Utterance]]
    _after_held_end: deque[np.ndarray]  # chunks since the held turn ended (a second part joins with them)
    _resume_reported: bool
    _probe_skip: int  # samples of the held turn's echoed prefix its probes leave out
    _speculation: int
    _cut: StandingCut  # the last speculation's standing
    _speculated_in_pause: bool
    speculations: int
    backchannels: int
    joined_parts: int

    def _begin_speech(self, utterance: list[np.ndarray]) -> None:
        """The caller is speaking (``VadStage``'s)."""
        raise NotImplementedError

    def _take_turn(self, manual: bool) -> Optional[tuple[InputCommitted, Utterance]]:
        """End the turn: its InputCommitted and Utterance (``VadStage``'s)."""
        raise NotImplementedError

    def _ms(self, samples: int) -> int:
        return int(samples * 1000 / self._rate)

    def _join_held(self) -> bool:
        """Speech again after the held turn ended at a pause, before it was decided ("Yeah..."
        "yeah.", "Wait," "stop."): it joins that turn, pause and all (one overlap, one turn: its
        held SpeechStopped and commit are dropped, the joined turn ends anew), and the decider
        hears both parts. False when there is no ended turn to join."""
        if self._held_end is None or self._held_start is None:
            return False
        audio = self._held_end[2].audio
        log.debug(
            "barge-in: speech again at %d ms before the held turn was decided: joined", self._ms(self._candidate_start)
        )
        self._held_end = None
        self._begin_speech([audio, *self._after_held_end])  # the pause and the new part's first chunks
        self._after_held_end.clear()
        self.joined_parts += 1
        self._act(self._barge.goes_on(self._candidate_start))
        return True

    def _echoed_prefix(self, prefix: list[np.ndarray], turn: TurnDetection, received_at: float) -> int:
        """Samples of the held turn's prefix its probes leave out: all but ``PROBE_PREFIX_MS`` when
        the prefix is mostly the reply's own echo (``echo_guard_correlation`` or more: a leg without
        echo cancellation), else none."""
        keep = int(PROBE_PREFIX_MS * self._rate / 1000)
        size = sum(chunk.size for chunk in prefix)
        if size <= keep:
            return 0
        candidate_s = sum(chunk.size for chunk in self._utterance[len(prefix) :]) / self._rate
        if self.ctx.echo_share(np.concatenate(prefix), received_at - candidate_s) < turn.echo_guard_correlation:
            return 0
        return size - keep

    def _act(self, action: Action) -> None:
        """Carry out what the decider said for the held turn."""
        if action is Action.PROBE:
            self._probe()
        elif action is Action.INTERRUPT:
            self._release_held()
        elif action is Action.RESUME:
            self.ctx.resume_reply()
            if not self._resume_reported:  # once per pause
                self._resume_reported = True
                self._report("resumed")
            if self._barge.ended and not self._barge.awaiting:
                self.backchannels += 1
                self._held_start, self._held_end = None, None
                self._barge.clear()
        elif action is Action.REPAUSE:
            self._resume_reported = False
            if not self.ctx.pause_reply():
                self._release_held()  # the reply ended meanwhile: this is an ordinary turn

    def _probe(self) -> None:
        """Transcribe the held speech so far (the turn's speculative STT, its text handed back)."""
        self._speculation += 1
        self.speculations += 1
        self._speculated_in_pause = True
        if self._held_end is not None:
            audio = self._held_end[2].audio
            self._held_end[2].speculation = self._speculation  # the probe covers the whole turn
        else:
            audio = np.concatenate(self._utterance)
            self._cut.cut()
        audio = audio[self._probe_skip :]  # an echoed prefix: PROBE_PREFIX_MS of it, not all
        self._barge.probe_sent(self._speculation, self._position)
        self.emit(Utterance(self._call, audio=audio, speculative=True, speculation=self._speculation, probe=True))

    def _log_heard(self, message: BargeInHeard, echo: tuple[str, ...]) -> None:
        """DEBUG: what a barge-in probe heard, word by word, and which stretch of the held speech it
        covers (ms from the speech's onset; the probe also holds ``PROBE_PREFIX_MS`` before it),
        with the reply's words that may echo in it."""
        if not log.isEnabledFor(logging.DEBUG) or not self._barge.held:
            return
        cut = self._barge.probe_cut if message.speculation == self._barge.probe else None
        words = " ".join(f"{w.text!r}:{w.probability:.2f}" for w in message.words) or "-"
        log.debug(
            "barge-in probe %d (0-%s ms of the held speech%s) heard %r: %s; the reply played meanwhile: %r",
            message.speculation,
            "?" if cut is None else self._ms(cut - self._barge.start),
            "" if message.trusted else ", not trusted",
            message.transcript,
            words,
            " ".join(echo),
        )

    def _hold_end(self, stopped: SpeechStopped) -> None:
        """The held turn ended: keep its events and utterance until the decision."""
        taken = self._take_turn(manual=False)
        if taken is not None:
            self._held_end = (stopped, *taken)
            self._after_held_end.clear()
        self._act(self._barge.turn_ended())

    def _release_held(self) -> None:
        """Interrupt: report the held turn as it happened; the unit cancels the reply."""
        start, end, transcript = self._held_start, self._held_end, self._barge.transcript
        self._held_start, self._held_end = None, None
        self._barge.clear()
        if start is None:
            return
        self.ctx.on_speech_started(start)
        self._report("interrupted", transcript, start.audio_start_ms)
        if end is not None:
            self.ctx.notify(end[0])
            self.ctx.notify(end[1])
            self.emit(end[2])

    def _drop_held(self) -> None:
        """The input was cleared under a held turn: forget it and play the reply on."""
        self._held_start, self._held_end = None, None
        self._barge.clear()
        self.ctx.resume_reply()

    def _report(self, decision: str, transcript: Optional[str] = None, start_ms: Optional[int] = None) -> None:
        text = self._barge.transcript if transcript is None else transcript
        log.debug(
            "barge-in %s at %d ms of the input stream (last probe heard %r)", decision, self._ms(self._position), text
        )
        self.ctx.notify(
            BargeInDecided(
                self._call,
                decision=decision,
                transcript=text,
                audio_start_ms=self._ms(self._barge.start) if start_ms is None else start_ms,
                decided_ms=self._ms(self._position),
            )
        )
