"""Compute seconds per model call, for the metrics: a :class:`ModelSet` whose models time each
call and report it as ``observe(stage, seconds)``.

Stages: ``vad`` (one ``speech_probability`` of a 512-sample chunk), ``end_of_turn`` (one Smart Turn
judgement), ``stt`` (one ``transcribe``, or ``transcribe_words`` of a barge-in probe), ``llm`` (one
``generate``, less the wait for the shared engine: ``Generation.queue_wait_s``) and ``tts`` (the
time spent producing each sentence of a ``synthesize``, not the time its consumer holds it). Every
other attribute (``sample_rate``, ``voice``, ``name``, the LLM's ``queue``...) is the wrapped
model's. ``observe`` is called on the stage threads and must be thread-safe and quick.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Optional

import numpy as np

from gateway.models.base import ChatMessage, Generation, GenerationOptions, ModelSet, ScoredTranscript

Observe = Callable[[str, float], None]


class _Metered:
    """Forwards every attribute it does not define to the wrapped model."""

    def __init__(self, model: Any, observe: Observe) -> None:
        self._model = model
        self._observe = observe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class _MeteredVadStream(_Metered):
    def speech_probability(self, chunk: np.ndarray) -> float:
        started = time.perf_counter()
        try:
            return float(self._model.speech_probability(chunk))
        finally:
            self._observe("vad", time.perf_counter() - started)


class _MeteredVad(_Metered):
    def new_stream(self) -> Any:
        return _MeteredVadStream(self._model.new_stream(), self._observe)


class _MeteredEndOfTurn(_Metered):
    def end_of_turn_probability(self, audio: np.ndarray) -> float:
        started = time.perf_counter()
        try:
            return float(self._model.end_of_turn_probability(audio))
        finally:
            self._observe("end_of_turn", time.perf_counter() - started)


class _MeteredStt(_Metered):
    def transcribe(self, audio: np.ndarray, language: str = "en") -> str:
        started = time.perf_counter()
        try:
            return str(self._model.transcribe(audio, language=language))
        finally:
            self._observe("stt", time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        if name == "transcribe_words":  # optional (WordScoringSpeechToText): metered when the engine has it
            scoring = getattr(self._model, name)

            def transcribe_words(audio: np.ndarray, language: str = "en") -> ScoredTranscript:
                started = time.perf_counter()
                try:
                    heard: ScoredTranscript = scoring(audio, language=language)
                    return heard
                finally:
                    self._observe("stt", time.perf_counter() - started)

            return transcribe_words
        return getattr(self._model, name)


class _MeteredLlm(_Metered):
    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        started = time.perf_counter()
        result: Generation = self._model.generate(messages, max_tokens, should_stop, on_text, options)
        self._observe("llm", max(0.0, time.perf_counter() - started - result.queue_wait_s))
        return result


class _MeteredTts(_Metered):
    def synthesize(self, text: str, speed: float = 1.0, voice: Optional[str] = None) -> Iterator[np.ndarray]:
        pieces = iter(self._model.synthesize(text, speed=speed, voice=voice))
        while True:
            started = time.perf_counter()
            try:
                piece = next(pieces)
            except StopIteration:
                return
            finally:
                self._observe("tts", time.perf_counter() - started)
            yield piece


def metered_models(models: ModelSet, observe: Observe) -> ModelSet:
    """A ModelSet over the same (shared) models that reports each call's compute to ``observe``."""
    return ModelSet(
        vad=_MeteredVad(models.vad, observe),
        stt=_MeteredStt(models.stt, observe),
        llm=_MeteredLlm(models.llm, observe),
        tts=_MeteredTts(models.tts, observe),
        end_of_turn=_MeteredEndOfTurn(models.end_of_turn, observe) if models.end_of_turn is not None else None,
    )
