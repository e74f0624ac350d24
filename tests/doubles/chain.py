"""The StageContext a unit gives its stages, and a VAD -> STT chain run by hand in the test's thread
(pipeline tests; no stage threads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from gateway.models.base import ScoredTranscript
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.events import PipelineEvent, TranscriptionCompleted
from gateway.pipeline.messages import AudioIn, BargeInHeard, Message, Utterance
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stt import SttStage
from gateway.pipeline.turn import TurnDetection
from gateway.pipeline.vad import VadStage
from tests.doubles.speech import CALL, SttDouble, VadDouble


@dataclass
class ContextDouble:
    """The StageContext a unit gives its stages: the call's settings and an event list."""

    settings: CallSettings = field(default_factory=CallSettings)
    call_id: Optional[str] = CALL
    events: list[PipelineEvent] = field(default_factory=list)

    def is_current(self, generation: int) -> bool:
        return True

    def notify(self, event: PipelineEvent) -> None:
        self.events.append(event)

    def on_speech_started(self, event: PipelineEvent) -> None:
        self.events.append(event)

    # barge-in hooks: ``playing`` says whether reply audio plays; ``echo`` is every echo_share answer
    playing: bool = False
    paused: bool = False
    echo: float = 0.0
    heard: list[BargeInHeard] = field(default_factory=list)

    def pause_reply(self) -> bool:
        self.paused = self.playing
        return self.playing

    def resume_reply(self) -> None:
        self.paused = False

    def barge_in_heard(self, call_id: str, speculation: int, heard: ScoredTranscript) -> None:
        self.heard.append(
            BargeInHeard(
                call_id, speculation=speculation, transcript=heard.text, words=heard.words, trusted=heard.trusted
            )
        )

    def echo_share(self, audio: np.ndarray, end_time: float) -> float:
        return self.echo

    # the words of the reply played so far, each with the (test clock) time its audio began to play
    played: list[tuple[float, str]] = field(default_factory=list)

    def reply_words_since(self, since: float) -> list[str]:
        return [word for when, word in self.played if when >= since]

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


class Chain:
    """VAD -> STT run in the test's thread: each audio frame is handled, then whatever the VAD sent on.

    ``vad``, ``end_of_turn`` and ``stt`` are models (doubles by default; real ones work the same).
    """

    def __init__(self, turn: TurnDetection, end_of_turn: Any, vad: Any = None, stt: Any = None) -> None:
        self.ctx = ContextDouble(settings=CallSettings(turn=turn))
        self.stt_in = StageQueue()
        self.stt_model = stt if stt is not None else SttDouble()
        self.vad = VadStage(self.ctx, StageQueue(), self.stt_in, vad if vad is not None else VadDouble(), end_of_turn)
        self.stt = SttStage(self.ctx, self.stt_in, None, self.stt_model)
        self.sent: list[Utterance] = []
        self.clock = 0.0
        # A starved STT (a machine too busy to transcribe the overlap in time): barge-in probes after
        # the first ``answered_probes`` are transcribed, but their answers wait in ``late`` until
        # ``deliver_late``. None: every answer at once.
        self.answered_probes: Optional[int] = None
        self.late: list[BargeInHeard] = []

    def play(self, audio: np.ndarray) -> None:
        """Feed float audio in 20 ms frames, as the inbound reader does; arrival times advance 20 ms a frame."""
        samples = (np.clip(audio, -1, 1) * 32767).astype(np.int16)
        for start in range(0, samples.size, 320):
            self.clock += 0.02
            self.handle_vad(AudioIn(CALL, samples=samples[start : start + 320], received_at=self.clock))

    def handle_vad(self, message: Message) -> None:
        self.vad.handle(message)
        while (queued := self.stt_in.get(timeout=0)) is not None:
            assert isinstance(queued, Utterance)
            self.sent.append(queued)
            self.stt.handle(queued)
            while self.ctx.heard:  # a barge-in probe's text goes back to the VAD, as the unit routes it
                heard = self.ctx.heard.pop(0)
                if self.answered_probes is not None and heard.speculation > self.answered_probes:
                    self.late.append(heard)
                else:
                    self.vad.handle(heard)

    def deliver_late(self) -> None:
        """Hand the VAD the probe answers a starved STT held back, in order."""
        while self.late:
            self.handle_vad(self.late.pop(0))

    def transcripts(self) -> list[str]:
        return [e.transcript for e in self.ctx.of(TranscriptionCompleted)]
