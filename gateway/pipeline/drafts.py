"""Drafts of a caller's turn while the caller still speaks: when the VAD stage sends the turn so far
to STT before the pause that may end it, so that the LLM reads the reply's prompt (the caller's
words so far) while the caller is still talking, and the pause's transcript is often ready at once.

Reading a prompt is the slow part of a reply's first token on a CPU: ~35 ms a prompt token on one
thread of a 2-core box, so the 14-32 tokens of a held-out question's words and the reply's head
took 0.3-1.1 s after the pause's transcript, and the preemptive reply (``gateway.pool.preemptive``)
held at that pause had not yet its first token when the turn ended; that transcript itself took
0.25-0.53 s of Whisper after the 120 ms pause (``scripts/bench_turn.py``, stop 46).

- A draft goes to STT at the first silent chunk of a dip in the speech once the turn holds
  :data:`DIP_DRAFT_EVERY_MS` more audio than at the last draft (its words are whole there), or at a
  voiced chunk after :data:`DRAFT_EVERY_MS` without one. Its text goes to the session
  (``TranscriptDrafted.speaking``), which has the LLM read the prompt ahead
  (``PipelineControl.read_ahead`` with ``reply=False``: no reply is started from it); the prompt
  of the pause's transcript then shares every token up to the first word that changed.
- At the turn's start, an empty draft (``TranscriptDrafted`` with no words, from the VAD stage):
  the LLM reads the conversation up to the caller's words (the user turn's header), which a short
  turn with no other draft would otherwise read after its pause (3 of its ~8 prompt tokens).
- At the pause (``SPECULATE_AFTER_MS``), a draft cut in this pause with nothing but silence after
  it (or a quiet chunk only after a still one: no tail of its last word) *stands* for the turn so
  far: it is the pause's transcript (``Utterance.draft``), and STT does not transcribe the turn
  again. Otherwise the pause's transcript is made as before.

Drafts are speculative work of the shared models: STT transcribes one only when no due work waits
for the speech models (:data:`~gateway.models.compute.deadline.NO_DEADLINE`; due at once when the
pause that takes it or the finished turn is queued behind it in STT) and skips it once a newer
draft, the pause's own transcript or the end of the turn overtook it (its ``voided``); one
overtaken while it was transcribed goes nowhere. They are sent only while this process serves at
most :data:`DRAFT_MAX_CALLS` calls: with more, the cores are never idle while a caller speaks, and
a draft's transcription (which cannot be stopped once started) would make another caller's first
clause wait; and only when the turn starts a response (``TurnDetection.drafts_while_speaking``).
"""

from __future__ import annotations

import threading
from typing import Optional

from gateway.models.compute.core_use import CORE_USE
from gateway.pipeline.standing_cut import StandingCut

# A draft is sent once the turn holds this much more audio than at its last draft, ms: at the first
# silent chunk of a dip in the speech (the words so far are whole), or at a voiced chunk when the
# caller talks on without one for :data:`DRAFT_EVERY_MS`.
DIP_DRAFT_EVERY_MS = 500
DRAFT_EVERY_MS = 2000
# A dip's draft is sent only this early in it, ms of silence (later, the pause's own transcript comes).
DIP_DRAFT_WITHIN_MS = 96
# Drafts are sent only while this process serves this many calls or fewer (``CoreUse.calls``).
DRAFT_MAX_CALLS = 2


class SpeakingDrafts:
    """The drafts of one VAD stage (``rate``: samples per second of its audio).

    :meth:`start` at a turn's start; :meth:`due` at each chunk of the turn (``dip``: a silent one
    early in a dip); :meth:`sent` when a draft goes to STT (its number and ``voided`` event
    returned); :meth:`spoke` at a chunk that is not silence, :meth:`still` at one that is;
    :meth:`take` at the pause, for the pause's transcript: the last draft when it *stands* for the
    turn so far (cut in a silence, and nothing but silence after it), so STT need not transcribe
    the turn again; :meth:`covered` when the pause's own transcript is made instead; :meth:`void`
    when the turn ends. VAD stage thread only."""

    def __init__(
        self,
        rate: int,
        every_ms: int = DRAFT_EVERY_MS,
        dip_every_ms: int = DIP_DRAFT_EVERY_MS,
        max_calls: int = DRAFT_MAX_CALLS,
    ) -> None:
        self._rate = rate
        self._every = int(rate * every_ms / 1000)
        self._dip_every = int(rate * dip_every_ms / 1000)
        self._max_calls = max_calls
        self._drafted = 0  # samples of the turn at its last draft
        self._voided: Optional[threading.Event] = None
        self._cut = StandingCut()  # the last draft's: it stands while only silence followed it
        self.number = 0  # the last draft's number (this stage's drafts, all calls)
        self.sent_count = 0  # drafts sent (all calls), for metrics and tests
        self.taken = 0  # drafts that stood for the turn at its pause (all calls)

    def start(self) -> None:
        """A new turn: no draft of it yet (any earlier one is voided)."""
        self.void()
        self._drafted = 0

    def allowed(self) -> bool:
        """Whether drafts are sent now: at most ``max_calls`` calls connected (``CoreUse.calls``)."""
        return CORE_USE.calls <= self._max_calls

    def due(self, turn_samples: int, dip: bool = False, silence_samples: int = 0) -> bool:
        """True when the turn (``turn_samples`` of audio so far) should be drafted now: at a voiced
        chunk (``dip`` False) or a silent one ``silence_samples`` into a dip."""
        if not self.allowed():
            return False
        if dip:
            early = silence_samples * 1000 <= DIP_DRAFT_WITHIN_MS * self._rate
            return early and turn_samples - self._drafted >= self._dip_every
        return turn_samples - self._drafted >= self._every

    def sent(self, turn_samples: int, dip: bool = False) -> tuple[int, threading.Event]:
        """A draft of ``turn_samples`` goes to STT now (``dip``: cut in a silence); returns its
        number and its ``voided`` event (the draft before it is voided: this one covers more)."""
        self.covered(turn_samples)
        self.number += 1
        self.sent_count += 1
        self._cut.cut(stands=dip)
        self._voided = threading.Event()
        return self.number, self._voided

    def spoke(self, quiet: bool = False) -> None:
        """A chunk that is not silence: the last draft no longer covers the turn so far; unless
        ``quiet`` (under the turn's threshold) after a still chunk followed the draft's cut (no
        tail of its last word: ``gateway.pipeline.standing_cut``)."""
        if quiet:
            self._cut.quiet()
        else:
            self._cut.voiced()

    def still(self) -> None:
        """A still chunk (silence, not a quiet one): from now on a quiet chunk leaves a draft that
        stands standing."""
        self._cut.still()

    def take(self) -> int:
        """At the pause: the number of the last draft if it stands for the turn so far (it is the
        pause's transcript from now on: nothing voids it), else 0."""
        if not self._cut.drop():
            return 0
        self._voided = None
        self.taken += 1
        return self.number

    def covered(self, turn_samples: int) -> None:
        """A transcript of the turn's first ``turn_samples`` is on its way (the pause's own
        speculative one): the last draft is voided, the next is due from here on."""
        self.void()
        self._drafted = turn_samples

    def void(self) -> None:
        """The last draft is overtaken (a newer draft, the pause's transcript, the turn's end): STT
        skips it if it has not started yet."""
        self._cut.drop()
        if self._voided is not None:
            self._voided.set()
            self._voided = None
