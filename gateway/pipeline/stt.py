"""STT stage: transcribe each finished caller turn."""

from __future__ import annotations

import time

from gateway.models.base import SpeechToText
from gateway.pipeline.events import TranscriptionCompleted
from gateway.pipeline.messages import Message, Utterance
from gateway.pipeline.stage import Stage


class SttStage(Stage):
    """Consumes :class:`Utterance`; reports :class:`TranscriptionCompleted` to the session.

    The transcript goes up to the session (the Realtime layer decides whether a response follows,
    as ``turn_detection.create_response`` says), not straight on to the LLM.
    """

    name = "stt"

    def __init__(self, ctx, inbox, outbox, stt: SpeechToText) -> None:
        super().__init__(ctx, inbox, outbox)
        self._stt = stt

    def handle(self, message: Message) -> None:
        if not isinstance(message, Utterance):
            return
        text = self._stt.transcribe(message.audio, language=self.ctx.language)
        message.latency.mark("stt_done", time.monotonic())
        self.ctx.notify(TranscriptionCompleted(message.session_id, transcript=text, latency=message.latency))
