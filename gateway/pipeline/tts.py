"""TTS stage: speak each text piece into the unit's playout buffer."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Optional

import numpy as np

from gateway.media.lead_in import trim_lead_in
from gateway.media.playout import SAMPLE_RATE
from gateway.media.resample import Resampler
from gateway.models.base import TextToSpeech
from gateway.models.compute.deadline import each_speech_item
from gateway.pipeline.events import ResponseAudioTranscriptDelta, ResponseFinished
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import Message, ResponseEnd, TextChunk
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.stage import Stage, StageContext

SYNTHESIS_LEAD_S = 1.0  # a later sentence is due this long before the queued audio runs out, s


class TtsStage(Stage):
    """Consumes :class:`TextChunk` and :class:`ResponseEnd` (the last stage).

    Audio is resampled to 48 kHz and written to ``ctx.playout``; the write blocks while the buffer
    is full, which is the back-pressure that keeps queued reply audio short. The generation id is
    checked per synthesized sentence and per written piece. Each chunk is spoken with the ``voice``
    and ``speed`` of its ``settings`` (the call's ``audio.output`` settings when the response started).
    Every sentence of an engine that computes here is synthesized in a slot of the shared speech
    models (``SPEECH_MODELS``, by deadline): a reply's first one is due when its turn was asked, a later one
    :data:`SYNTHESIS_LEAD_S` before the audio already queued runs out (so it waits while that is
    seconds away and a first clause of another call wants the core). A held preemptive reply's
    sentences have no deadline (``TextChunk.hold``) until its response adopts it; the wait for a
    slot follows that change. Its audio waits in the playout buffer, which holds it unplayed.
    The reply's first audio starts at most ``LEAD_IN_KEEP_MS`` before its voice
    (``gateway.media.lead_in``): the voice's own silence before the first word is not played.
    """

    name = "tts"

    def __init__(self, ctx: StageContext, inbox: StageQueue, outbox: Optional[StageQueue], tts: TextToSpeech) -> None:
        super().__init__(ctx, inbox, outbox)
        self._tts = tts
        self._resampler = Resampler(SAMPLE_RATE)

    def reset(self) -> None:
        self._resampler = Resampler(SAMPLE_RATE)

    def handle(self, message: Message) -> None:
        if isinstance(message, TextChunk):
            self._speak(message)
        elif isinstance(message, ResponseEnd):
            if not self.ctx.is_current(message.generation):
                return
            if message.audio:
                self.ctx.playout.end(message.generation)
            self.ctx.notify(
                ResponseFinished(
                    message.call_id,
                    generation=message.generation,
                    text=message.text,
                    status=message.status,
                    audio=message.audio,
                    output_tokens=message.output_tokens,
                    tool_calls=message.tool_calls,
                    input_tokens=message.input_tokens,
                    cached_tokens=message.cached_tokens,
                    finish_reason=message.finish_reason,
                    retried=message.retried,
                )
            )

    def _speak(self, chunk: TextChunk) -> None:
        generation = chunk.generation
        first = True
        settings = chunk.settings
        sentences = self._tts.synthesize(chunk.text, speed=settings.speed, voice=settings.voice)

        def stale() -> bool:
            return not self.ctx.is_current(generation) or self.retired.is_set()

        def due() -> float:
            latency = chunk.latency
            if latency.tts_first_chunk is None:  # the reply's first audio: due when it was asked
                due_at = latency.response_requested or time.monotonic()
            else:
                due_at = time.monotonic() + self.ctx.playout.buffered_ms / 1000 - SYNTHESIS_LEAD_S
            return due_at if chunk.hold is None else chunk.hold.due(due_at)

        for audio in each_speech_item(self._tts, _started(sentences, chunk.latency), due, stale):
            if stale():
                return
            if chunk.latency.tts_first_chunk is None:  # the reply's first audio
                audio = trim_lead_in(audio, self._tts.sample_rate)
            samples = self._resampler.resample_array(audio, self._tts.sample_rate)
            chunk.latency.mark("tts_first_chunk", time.monotonic())
            if first:
                # Transcript deltas go out as their audio is queued, never ahead of a cancel.
                delta = ResponseAudioTranscriptDelta(chunk.call_id, generation=generation, delta=chunk.text + " ")
                self.ctx.notify(delta)
            if not self.ctx.playout.write(generation, samples, chunk.text if first else ""):
                return
            first = False


def _started(sentences: Iterable[np.ndarray], latency: TurnLatency) -> Iterator[np.ndarray]:
    """``sentences`` (a TTS generator), marking the turn's ``tts_started`` as the first is asked
    for (inside its speech-model slot: the wait for the slot is over)."""
    iterator = iter(sentences)
    while True:
        latency.mark("tts_started", time.monotonic())
        try:
            item = next(iterator)
        except StopIteration:
            return
        yield item
