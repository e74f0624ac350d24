"""LLM stage: stream a reply and cut it into sentences for TTS while it is generated."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Optional

from gateway.models.base import Generation, GenerationOptions, LanguageModel
from gateway.models.compute.core_use import CORE_USE
from gateway.pipeline.chunking import SentenceChunker
from gateway.pipeline.events import ResponseTextDelta
from gateway.pipeline.messages import Message, ResponseEnd, ResponseRequest, TextChunk
from gateway.pipeline.pacing import ReplyPace
from gateway.pipeline.queues import StageQueue
from gateway.pipeline.spoken_text import SpokenTextStream, spoken
from gateway.pipeline.stage import Stage, StageContext

log = logging.getLogger(__name__)

# The one retry of a reply that ended with no words may not end before this many tokens: a model
# that ends at once (Qwen2.5-Coder-1.5B: one token, "." as the caller's last words) or after a
# lone mark must go on to words.
RETRY_MIN_TOKENS = 4
_WORD = re.compile(r"[^\W_]")  # a letter or digit of any script: a sentence with none says nothing


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
    reply streams the model's text unchanged as ``ResponseTextDelta``, from its first word on
    (leading marks wait for it: :class:`_HeldText`). A preemptive reply (``hold``
    set, started at the caller's pause) is generated the same way, at no deadline while held; it
    stops (no ``ResponseEnd``) when it gives way to another caller's turn (``ReplyHold.gives_way``).
    ``ResponseEnd.status`` is "incomplete" when the token cap or the compute budget cut the reply
    (``finish_reason`` "length" or "budget"); ``tool_calls`` carries any function calls.

    A sentence with no letter or digit (a lone ".") is not spoken. A reply the model ended with no
    words (nothing to say or show, no call: the caller would hear silence) is asked again once with
    its end barred for the first :data:`RETRY_MIN_TOKENS` tokens (``GenerationOptions.min_tokens``),
    in the same generation; the reply is the retry's alone (its text; the tokens of both), and the
    response tracker logs it (one WARNING, with the session and item). A reply with words costs
    nothing more. Still none: ``status`` "failed", ``finish_reason`` "empty". An engine error
    (LanguageModelError, e.g. an LLM server that timed out) propagates to the stage loop, which
    reports it as StageFailed (an ``error`` event).
    """

    name = "llm"

    def __init__(
        self,
        ctx: StageContext,
        inbox: StageQueue,
        outbox: Optional[StageQueue],
        llm: LanguageModel,
        hold_for_first_audio: bool = True,
    ) -> None:
        super().__init__(ctx, inbox, outbox)
        self._llm = llm
        # False when the TTS computes elsewhere (a speech server): its first audio needs no core here
        self._hold_for_first_audio = hold_for_first_audio

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

        shown = _HeldText(lambda text: self.ctx.notify(ResponseTextDelta(call, generation=generation, delta=text)))

        def on_text(piece: str) -> None:
            if stale():
                return
            latency.mark("llm_first_token", time.monotonic())
            if not message.audio:
                shown.push(piece)
                return
            for sentence in chunker.push(lines.push(piece)):
                self._send_chunk(message, sentence, said, pace)

        def reply(options: GenerationOptions) -> Optional[Generation]:
            result = self._llm.generate(message.messages, message.max_tokens, stale, on_text, options)
            if stale():
                return None
            if message.audio:
                for sentence in chunker.push(lines.flush()) + chunker.flush():
                    self._send_chunk(message, sentence, said, pace)
            return result

        result = reply(options)
        if result is None:
            return
        retried = self._ended_with_no_words(message, result, said)
        if retried:
            shown.drop()  # the client sees the retry's text only (the response tracker warns, once)
            log.info(
                "the LLM ended reply %d with no words (%d tokens, %r): asked again, its end barred for %d tokens",
                generation,
                result.tokens,
                result.text[:40],
                RETRY_MIN_TOKENS,
            )
            again = reply(replace(options, min_tokens=RETRY_MIN_TOKENS))
            if again is None:
                return
            result = _joined(result, again)
        shown.flush()
        empty = retried and self._ended_with_no_words(message, result, said)
        text = " ".join(said) if message.audio else result.text.strip()
        self.emit(
            ResponseEnd(
                call,
                generation=generation,
                text=text,
                status="failed" if empty else result.status,
                audio=message.audio,
                output_tokens=result.tokens,
                tool_calls=result.tool_calls,
                input_tokens=result.prompt_tokens,
                cached_tokens=result.cached_tokens,
                finish_reason="empty" if empty else result.finish_reason,
                retried=retried,
            )
        )

    @staticmethod
    def _ended_with_no_words(message: ResponseRequest, result: Generation, said: list[str]) -> bool:
        """The model ended the reply itself (not cut, cancelled or a call) and it holds nothing to
        hear (audio: no sentence went to TTS) or read (text: blank)."""
        nothing = not said if message.audio else not _WORD.search(result.text)
        return nothing and result.finish_reason == "stop" and not result.tool_calls

    def _send_chunk(
        self,
        request: ResponseRequest,
        sentence: str,
        said: list[str],
        pace: Optional[ReplyPace],
    ) -> None:
        """Hand ``sentence`` to TTS; the reply's first (with audio) holds a lone call's LLM until
        its audio is made (``CoreUse.await_first_audio``) while its response is current, when
        the TTS computes in this process."""
        words = spoken(sentence)
        if not _WORD.search(words):  # punctuation alone ("."): nothing to say
            return
        said.append(words)
        if pace is not None:
            pace.spoken(len(words.split()))
        if self._hold_for_first_audio and request.latency.first_sentence is None and pace is not None:
            latency, generation = request.latency, request.generation
            CORE_USE.await_first_audio(
                lambda: latency.tts_first_chunk is not None,
                lambda: self.ctx.is_current(generation) and not self.retired.is_set(),
            )
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


class _HeldText:
    """The text of a text-only reply on its way to the client (``show``: a ``ResponseTextDelta``),
    held back until it holds a word (a letter or digit): an attempt the model ends with none (".")
    is asked again (:class:`LlmStage`), and the client must read the retry's text alone, as the
    response's final text has it. A reply with words is held for no more than its leading marks."""

    def __init__(self, show: Callable[[str], None]) -> None:
        self._show = show
        self._held: list[str] = []
        self._open = False  # a word was shown: the rest streams as it comes

    def push(self, piece: str) -> None:
        if self._open:
            self._show(piece)
            return
        self._held.append(piece)
        if _WORD.search(piece):
            self._open = True
            self.flush()

    def flush(self) -> None:
        """Show what is held (the end of the reply: its text, words or not, is the final text)."""
        if self._held:
            text, self._held = "".join(self._held), []
            self._show(text)

    def drop(self) -> None:
        """Forget what is held (an attempt with no words, asked again)."""
        self._held = []


def _joined(first: Generation, retry: Generation) -> Generation:
    """One reply of a first attempt (no words) and its retry: the retry's text, the tokens of both."""
    return replace(
        retry,
        tokens=first.tokens + retry.tokens,
        prompt_tokens=first.prompt_tokens + retry.prompt_tokens,
        cached_tokens=first.cached_tokens + retry.cached_tokens,
        queue_wait_s=first.queue_wait_s + retry.queue_wait_s,
    )
