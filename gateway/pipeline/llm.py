"""LLM stage: stream a reply and cut it into sentences for TTS while it is generated."""

from __future__ import annotations

import time

from gateway.models.base import LanguageModel
from gateway.pipeline.chunking import SentenceChunker
from gateway.pipeline.events import ResponseTextDelta
from gateway.pipeline.messages import Message, ResponseEnd, ResponseRequest, TextChunk
from gateway.pipeline.stage import Stage


class LlmStage(Stage):
    """Consumes :class:`ResponseRequest`; emits :class:`TextChunk` pieces, then :class:`ResponseEnd`.

    The generation id is checked once per token: a cancelled response stops generating at once and
    its remaining text is never emitted.
    """

    name = "llm"

    def __init__(self, ctx, inbox, outbox, llm: LanguageModel) -> None:
        super().__init__(ctx, inbox, outbox)
        self._llm = llm

    def handle(self, message: Message) -> None:
        if not isinstance(message, ResponseRequest):
            return
        generation, session = message.generation, message.session_id
        if not self.ctx.is_current(generation):
            return
        chunker = SentenceChunker()
        latency = message.latency

        def stale() -> bool:
            return not self.ctx.is_current(generation) or self.retired.is_set()

        def on_text(piece: str) -> None:
            if stale():
                return
            latency.mark("llm_first_token", time.monotonic())
            if not message.audio:
                self.ctx.notify(ResponseTextDelta(session, generation=generation, delta=piece))
                return
            for sentence in chunker.push(piece):
                self._send_chunk(message, sentence)

        text, tokens = self._llm.generate(message.messages, message.max_tokens, stale, on_text)
        if stale():
            return
        if message.audio:
            for sentence in chunker.flush():
                self._send_chunk(message, sentence)
        status = "incomplete" if tokens >= message.max_tokens else "completed"
        self.emit(
            ResponseEnd(session, generation=generation, text=text.strip(), status=status, audio=message.audio, output_tokens=tokens)
        )

    def _send_chunk(self, request: ResponseRequest, sentence: str) -> None:
        request.latency.mark("first_sentence", time.monotonic())
        self.emit(
            TextChunk(request.session_id, generation=request.generation, text=sentence, latency=request.latency, speed=request.speed)
        )
