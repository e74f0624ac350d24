"""LLM stage: stream a reply and cut it into sentences for TTS while it is generated."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Optional

from gateway.models.base import LanguageModel
from gateway.pipeline.chunking import SentenceChunker
from gateway.pipeline.events import ResponseTextDelta
from gateway.pipeline.messages import Message, ResponseEnd, ResponseRequest, TextChunk
from gateway.pipeline.pacing import ReplyPace
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.spoken_text import SpokenTextStream, spoken
from gateway.pipeline.stage import Stage, StageContext


class LlmStage(Stage):
    """Consumes :class:`ResponseRequest`; emits :class:`TextChunk` pieces, then :class:`ResponseEnd`.

    The shared engine (``models.llm``) is asked with the request's :class:`GenerationOptions`;
    the generation id is checked once per token (and while the request waits for the engine): a
    cancelled response stops generating at once and its remaining text is never emitted. An audio
    reply is paced (``gateway.pipeline.pacing``): its first clause is due at once, its later tokens
    when its audio would run out, which an engine that batches turns serves by (``options.due``).

    For an audio reply the text is made fit to be read aloud (``gateway.pipeline.spoken_text``:
    no markdown, list markers or emoji) before it is cut into sentences, and the reply's final
    text (``ResponseEnd.text``, the transcript) is exactly the sentences sent to TTS. A text-only
    reply streams the model's text unchanged as ``ResponseTextDelta``. A preemptive reply (``hold``
    set, started at the caller's pause) is generated the same way, at no deadline while held; it
    stops (no ``ResponseEnd``) when it gives way to another caller's turn (``ReplyHold.gives_way``).
    ``ResponseEnd.status`` is "incomplete" when the token cap or the compute budget cut the reply;
    ``tool_calls`` carries any function calls. An engine error (LanguageModelError, e.g. an LLM server that timed out)
    propagates to the stage loop, which reports it as StageFailed (an ``error`` event).
    """

    name = "llm"

    def __init__(self, ctx: StageContext, inbox: StageQueue, outbox: Optional[StageQueue], llm: LanguageModel) -> None:
        super().__init__(ctx, inbox, outbox)
        self._llm = llm

    def handle(self, message: Message) -> None:
        if not isinstance(message, ResponseRequest):
            return
        generation, call = message.generation, message.call_id
        if not self.ctx.is_current(generation):
            return
        chunker = SentenceChunker()
        lines = SpokenTextStream()
        said: list[str] = []
        latency = message.latency
        pace = ReplyPace(latency, message.settings.speed, hold=message.hold) if message.audio else None
        options = message.options
        if pace is not None:
            options = replace(options, due=pace.due)
        elif message.hold is not None:  # a held text reply: no deadline until adopted, then due at once
            hold = message.hold
            options = replace(options, due=lambda: hold.due(hold.asked_at or time.monotonic()))

        def stale() -> bool:
            gave_way = message.hold is not None and message.hold.gives_way()
            return gave_way or not self.ctx.is_current(generation) or self.retired.is_set()

        def on_text(piece: str) -> None:
            if stale():
                return
            latency.mark("llm_first_token", time.monotonic())
            if not message.audio:
                self.ctx.notify(ResponseTextDelta(call, generation=generation, delta=piece))
                return
            for sentence in chunker.push(lines.push(piece)):
                self._send_chunk(message, sentence, said, pace)

        result = self._llm.generate(message.messages, message.max_tokens, stale, on_text, options)
        if stale():
            return
        if message.audio:
            for sentence in chunker.push(lines.flush()) + chunker.flush():
                self._send_chunk(message, sentence, said, pace)
        text = " ".join(said) if message.audio else result.text.strip()
        self.emit(
            ResponseEnd(
                call,
                generation=generation,
                text=text,
                status=result.status,
                audio=message.audio,
                output_tokens=result.tokens,
                tool_calls=result.tool_calls,
                input_tokens=result.prompt_tokens,
                cached_tokens=result.cached_tokens,
            )
        )

    def _send_chunk(self, request: ResponseRequest, sentence: str, said: list[str], pace: Optional[ReplyPace]) -> None:
        words = spoken(sentence)
        if not words:
            return
        said.append(words)
        if pace is not None:
            pace.spoken(len(words.split()))
        request.latency.mark("first_sentence", time.monotonic())
        self.emit(
            TextChunk(
                request.call_id,
                generation=request.generation,
                text=words,
                latency=request.latency,
                settings=request.settings,
                hold=request.hold,
            )
        )
