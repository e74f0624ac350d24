"""The stage chain of one unit: VAD -> STT -> LLM -> TTS threads and the named queues between them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from gateway.models.base import ModelSet
from gateway.models.compute.deadline import computes_here
from gateway.pipeline.llm import LlmStage
from gateway.pipeline.messages import CallEnd
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stage import Stage, StageContext
from gateway.pipeline.stt import SttStage
from gateway.pipeline.tts import TtsStage
from gateway.pipeline.vad import VadStage

# Builds one stage: (context, inbox, outbox or None for the last stage, shared models) -> Stage.
StageFactory = Callable[[StageContext, StageQueue, Optional[StageQueue], ModelSet], Stage]

STAGE_NAMES = ("vad", "stt", "llm", "tts")

# Caller audio the VAD's inbox holds, s, before its oldest is dropped: far more than the VAD ever
# lags on its own, and more than the burst a WebSocket session may append at once
# (``gateway.realtime.audio_intake.AUDIO_BURST_S``).
VAD_INBOX_S = 30.0
# Turns waiting for STT, s of their audio: two of the longest (``max_utterance_s``, 30 s).
STT_INBOX_S = 60.0


def _default_factories() -> dict[str, StageFactory]:
    return {
        "vad": lambda ctx, inbox, outbox, models: VadStage(ctx, inbox, outbox, models.vad, models.end_of_turn),
        "stt": lambda ctx, inbox, outbox, models: SttStage(ctx, inbox, outbox, models.stt),
        "llm": lambda ctx, inbox, outbox, models: LlmStage(
            ctx, inbox, outbox, models.llm, hold_for_first_audio=computes_here(models.tts)
        ),
        "tts": lambda ctx, inbox, outbox, models: TtsStage(ctx, inbox, None, models.tts),
    }


@dataclass
class StageChain:
    """Four stage threads and their inboxes: ``vad_in`` (caller audio, turn control; at most
    ``VAD_INBOX_S`` of audio), ``stt_in`` (finished turns; at most ``STT_INBOX_S``), ``llm_in``
    (response requests), ``tts_in`` (reply text).

    The TTS stage is last: a CallEnd marker that leaves it goes to ``on_marker_out``.
    """

    vad_in: StageQueue
    stt_in: StageQueue
    llm_in: StageQueue
    tts_in: StageQueue
    vad: Stage
    stt: Stage
    llm: Stage
    tts: Stage

    @classmethod
    def build(
        cls,
        ctx: StageContext,
        models: ModelSet,
        on_marker_out: Callable[[CallEnd], None],
        factories: Optional[dict[str, StageFactory]] = None,
    ) -> StageChain:
        """New queues and stages (not started); ``factories`` replaces stages by name (test doubles).
        The queues that hold caller audio are bounded by its seconds too (``VAD_INBOX_S``,
        ``STT_INBOX_S``, at the VAD's sample rate)."""
        make = {**_default_factories(), **(factories or {})}
        rate = models.vad.sample_rate
        vad_in = StageQueue(max_audio_samples=int(VAD_INBOX_S * rate))
        stt_in = StageQueue(max_audio_samples=int(STT_INBOX_S * rate))
        llm_in, tts_in = StageQueue(), StageQueue()
        chain = cls(
            vad_in=vad_in,
            stt_in=stt_in,
            llm_in=llm_in,
            tts_in=tts_in,
            vad=make["vad"](ctx, vad_in, stt_in, models),
            stt=make["stt"](ctx, stt_in, llm_in, models),
            llm=make["llm"](ctx, llm_in, tts_in, models),
            tts=make["tts"](ctx, tts_in, None, models),
        )
        chain.tts.on_marker_out = on_marker_out
        return chain

    @property
    def queues(self) -> tuple[StageQueue, StageQueue, StageQueue, StageQueue]:
        """The inboxes in chain order (VAD, STT, LLM, TTS)."""
        return (self.vad_in, self.stt_in, self.llm_in, self.tts_in)

    @property
    def stages(self) -> tuple[Stage, Stage, Stage, Stage]:
        """The stages in chain order (VAD, STT, LLM, TTS)."""
        return (self.vad, self.stt, self.llm, self.tts)

    def start(self, label: str) -> None:
        """Start every stage thread (named ``{label}-{stage}``)."""
        for stage in self.stages:
            stage.start(label)

    def flush(self) -> None:
        """Drop every queued data message; control markers stay."""
        for queue in self.queues:
            queue.flush()

    def send_marker(self, token: str) -> None:
        """Put a CallEnd marker tagged ``token`` at the head of the chain."""
        self.vad_in.put(CallEnd(token))

    def retire(self) -> None:
        """Tell every stage thread to stop; their later output goes nowhere."""
        for stage in self.stages:
            stage.retired.set()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s per thread; True if all ended."""
        return all([stage.join(timeout) for stage in self.stages])
