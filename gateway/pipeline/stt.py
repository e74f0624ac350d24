"""STT stage: transcribe each finished caller turn, using a speculative transcript when it still stands."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Optional

from gateway.models.base import HeardWord, ScoredTranscript, SpeechToText
from gateway.models.compute.deadline import NO_DEADLINE, Due, speech_model_call
from gateway.pipeline.events import TranscriptDrafted, TranscriptionCompleted, TranscriptionFailed
from gateway.pipeline.messages import Message, TurnsDropped, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stage import Stage, StageContext


@dataclass
class SpeculationStats:
    """Speculative STT of one stage, for metrics: ``started`` speculative transcriptions run,
    ``hits`` finished turns whose text came from one, ``discarded`` ones thrown away (the caller
    went on, or the call ended), ``wasted_s`` the compute seconds those cost, ``skipped`` pauses'
    ones and drafts never run (the caller went on, or a newer draft came, while they waited for the
    speech models), ``drafts`` the drafts transcribed while the caller spoke
    (``gateway.pipeline.drafts``) and ``from_drafts`` pauses' ones that were a draft's text (no
    transcription of their own; counted in ``started`` too). Written by the STT thread;
    :meth:`snapshot` may be read from any thread."""

    started: int = 0
    hits: int = 0
    discarded: int = 0
    wasted_s: float = 0.0
    skipped: int = 0
    drafts: int = 0
    from_drafts: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(
        self,
        started: int = 0,
        hits: int = 0,
        discarded: int = 0,
        wasted_s: float = 0.0,
        skipped: int = 0,
        drafts: int = 0,
        from_drafts: int = 0,
    ) -> None:
        """Add to the counters (thread-safe)."""
        with self._lock:
            self.drafts += drafts
            self.from_drafts += from_drafts
            self.started += started
            self.hits += hits
            self.discarded += discarded
            self.wasted_s += wasted_s
            self.skipped += skipped

    def snapshot(self) -> dict[str, float]:
        """The counters now: ``{"started", "hits", "discarded", "wasted_s", "skipped", "drafts", "from_drafts"}``."""
        with self._lock:
            return {
                "started": self.started,
                "hits": self.hits,
                "discarded": self.discarded,
                "wasted_s": round(self.wasted_s, 3),
                "skipped": self.skipped,
                "drafts": self.drafts,
                "from_drafts": self.from_drafts,
            }


# A pause's speculative transcript is due this long after the pause (the earliest the turn can end), s.
SPECULATION_DUE_S = 0.3
# Why a turn dropped from a full STT queue has no transcript (its item's transcription.failed).
DROPPED_TURN = "the turn was dropped unheard: speech-to-text had more audio waiting than it keeps"


def _voided(message: Utterance) -> bool:
    """True once a speculative ``message`` was overtaken (its ``voided`` set: the caller went on, a
    newer draft, the turn's end, a client's clear): its text no longer stands for the turn so far."""
    return message.voided is not None and message.voided.is_set()


@dataclass
class _Speculation:
    number: int
    text: str
    compute_s: float


class SttStage(Stage):
    """Consumes :class:`Utterance`; reports :class:`TranscriptionCompleted` to the session.

    The transcript goes up to the session (the Realtime layer decides whether a response follows,
    as ``turn_detection.create_response`` says), not straight on to the LLM.

    A speculative utterance (the turn so far, sent by the VAD at a short pause) is transcribed and
    its text kept, never reported to the client. A finished turn whose ``speculation`` names the kept one (the
    caller said nothing more after it) is reported with that text at once; any other finished turn
    is transcribed whole, and the kept text is discarded. So a caller who pauses and goes on gets
    one transcript of the whole turn, never the part before the pause. ``speculation`` holds the
    counters (:class:`SpeculationStats`). A speculative utterance marked ``probe`` (speech under
    the reply's audio, ``gateway.pipeline.bargein``) is transcribed quickly with each word's
    probability (the engine's ``transcribe_words`` when it has one) and handed back at once
    (``ctx.barge_in_heard``), for the VAD stage to decide the barge-in; any other one's text goes
    to the session as :class:`TranscriptDrafted` (the LLM may read the reply's prompt ahead).
    A :class:`TurnsDropped` (turns the full inbox dropped, in their place) reports each turn as
    :class:`TranscriptionFailed`, so the session's items stay in commit order. Transcriptions by an
    engine that computes here run in slots of the shared speech models (``SPEECH_MODELS``, by
    deadline): a finished turn's is due when the turn ended, a probe's at once, a pause's draft
    :data:`SPECULATION_DUE_S` later, a draft made while the caller speaks none (speculative) until
    the work queued behind it waits on it (then at once).
    """

    name = "stt"

    def __init__(self, ctx: StageContext, inbox: StageQueue, outbox: Optional[StageQueue], stt: SpeechToText) -> None:
        super().__init__(ctx, inbox, outbox)
        self._stt = stt
        self.speculation = SpeculationStats()
        self._kept: Optional[_Speculation] = None
        self._drafted: Optional[tuple[int, str]] = None  # the last draft's (number, text)

    def reset(self) -> None:
        self._discard_kept()
        self._drafted = None

    def handle(self, message: Message) -> None:
        if isinstance(message, TurnsDropped):
            for _ in range(message.turns):
                self.ctx.notify(TranscriptionFailed(message.call_id, message=DROPPED_TURN))
            return
        if not isinstance(message, Utterance):
            return
        if message.speculative:
            self._speculate(message)
            return
        self._drafted = None
        text = self._take_kept(message.speculation)
        if text is None:  # a finished turn is never voided: its transcript always comes
            text = self._transcribe(message, message.latency.end_of_turn or time.monotonic(), timed=True) or ""
        message.latency.mark("stt_done", time.monotonic())
        self.ctx.notify(TranscriptionCompleted(message.call_id, transcript=text, latency=message.latency))

    def _speculate(self, message: Utterance) -> None:
        if message.speaking:
            self._draft(message)
            return
        self._discard_kept()  # an older speculation was overtaken by this one
        drafted = self._drafted
        if message.draft and drafted is not None and drafted[0] == message.draft:
            if _voided(message):  # the caller went on meanwhile
                self.speculation.add(skipped=1)
                return
            self._keep_draft(message, drafted[1])
            return
        started = time.monotonic()
        # A probe decides a barge-in now; a pause's draft is due when the turn could end.
        heard = self._heard(message, started if message.probe else started + SPECULATION_DUE_S)
        if heard is None:  # the caller went on before the draft's turn for the speech models came
            self.speculation.add(skipped=1)
            return
        if not message.probe and _voided(message):  # ...or while it was transcribed: the pause is over
            self.speculation.add(started=1, discarded=1, wasted_s=time.monotonic() - started)
            return
        if heard.trusted:  # a decode that looped never stands for the finished turn
            self._kept = _Speculation(message.speculation, heard.text, time.monotonic() - started)
        self.speculation.add(started=1)
        if message.probe:
            self.ctx.barge_in_heard(message.call_id, message.speculation, heard)
        elif heard.text.strip():
            self.ctx.notify(TranscriptDrafted(message.call_id, transcript=heard.text))

    def _draft(self, message: Utterance) -> None:
        """A draft made while the caller speaks: transcribed when no due work waits for the speech
        models (skipped if a newer draft or the turn's end overtook it while it waited), its text
        to the session (``TranscriptDrafted.speaking``) and remembered: the pause's speculative
        utterance may name it as its transcript (``Utterance.draft``). One overtaken while it was
        transcribed (a newer draft, the turn's end, a client's clear) goes nowhere: something newer
        follows, and a cleared turn's words must not be read into a prompt."""
        text = self._transcribe(message, self._draft_due)
        if text is None:
            self.speculation.add(skipped=1)
            return
        self.speculation.add(drafts=1)
        if _voided(message):  # overtaken while transcribed (a newer draft, the turn's end, a clear)
            return
        self._drafted = (message.draft, text)
        if text.strip():
            self.ctx.notify(TranscriptDrafted(message.call_id, transcript=text, speaking=True))

    def _draft_due(self) -> float:
        """A waiting draft's deadline (monotonic s), asked again while it waits for the speech
        models: none (speculative work) while nothing waits behind it in STT; now once something
        does (the pause that takes it, the finished turn), as that work waits on it."""
        return time.monotonic() if len(self.inbox) else NO_DEADLINE

    def _keep_draft(self, message: Utterance, text: str) -> None:
        """The pause's speculative ``message`` is a draft's ``text`` (no transcription): kept for
        the turn, and drafted to the session as any pause's transcript."""
        self._kept = _Speculation(message.speculation, text, 0.0)
        self.speculation.add(started=1, from_drafts=1)
        if text.strip():
            self.ctx.notify(TranscriptDrafted(message.call_id, transcript=text))

    def _heard(self, message: Utterance, due: float) -> Optional[ScoredTranscript]:
        """A speculative utterance's transcript, in a slot of the shared speech models taken at
        ``due`` (monotonic s); None when its ``voided`` was set before the slot came. A barge-in
        probe gets the engine's quick transcript with word probabilities when it has one
        (``WordScoringSpeechToText``), else its text with every word at probability 1.0."""
        scoring = getattr(self._stt, "transcribe_words", None)
        if not message.probe or scoring is None:
            text = self._transcribe(message, due)
            if text is None:
                return None
            return ScoredTranscript(text, tuple(HeardWord(word) for word in text.split()) if message.probe else ())
        with speech_model_call(self._stt, due):
            heard: ScoredTranscript = scoring(message.audio, language=self.ctx.settings.language)
        return heard

    def _transcribe(self, message: Utterance, due: Due, timed: bool = False) -> Optional[str]:
        """The text of ``message``'s audio, transcribed in a slot of the shared speech models taken
        at ``due`` (monotonic s, or a function giving it, asked again while it waits); ``timed``:
        the slot's time is the turn's ``stt_started``. None when the message's ``voided`` was set
        while it waited for the slot."""
        with speech_model_call(self._stt, due, lambda: _voided(message)) as granted:
            if not granted:
                return None
            if timed:
                message.latency.mark("stt_started", time.monotonic())
            return self._stt.transcribe(message.audio, language=self.ctx.settings.language)

    def _take_kept(self, number: int) -> Optional[str]:
        """The kept text if it is speculation ``number`` (> 0); any other kept text is discarded."""
        kept, self._kept = self._kept, None
        if kept is not None and number and kept.number == number:
            self.speculation.add(hits=1)
            return kept.text
        if kept is not None:
            self.speculation.add(discarded=1, wasted_s=kept.compute_s)
        return None

    def _discard_kept(self) -> None:
        if self._kept is not None:
            self.speculation.add(discarded=1, wasted_s=self._kept.compute_s)
            self._kept = None
