"""Warm-up calls at start-up, so that the first caller's turn is as fast as the tenth.

The first call into each engine pays for one-time work: ONNX Runtime and CTranslate2 plan and
allocate on their first run, llama.cpp and torch fault their weights in and size their buffers,
Piper loads its phonemizer. VAD, Smart Turn and Whisper warm themselves up as they load; the LLM and
TTS are warmed here, after loading (a failure is logged, never fatal: the first call is then slow).
A batched llama.cpp engine also times its decode steps of every batch size here
(``BatchDecoder.measure_steps``): the lone step seeds the cost of a conversation admission
expects before it has measured one (``gateway.pool.load``).
"""

from __future__ import annotations

import logging
import time

from gateway.models.base import (
    ChatMessage,
    FunctionTool,
    GenerationOptions,
    LanguageModel,
    LanguageModelError,
    TextToSpeech,
)
from gateway.models.llama_cpp.batch import BatchDecoder

log = logging.getLogger(__name__)


def warm_up_models(
    llm: LanguageModel, tts: TextToSpeech, instructions: str = "You are a helpful voice assistant."
) -> None:
    """One short generation (2 tokens, with ``instructions`` as the system prompt), the decode
    step probe of a batched engine, and one short synthesis; logs how long each took."""
    started = time.monotonic()
    try:
        llm.generate(
            [ChatMessage("system", instructions), ChatMessage("user", "Hello.")],
            2,
            lambda: False,
            lambda piece: None,
        )
    except Exception:
        log.warning("LLM warm-up failed; the first response may be slow", exc_info=True)
    decoder = getattr(llm, "decoder", None)
    if isinstance(decoder, BatchDecoder):
        try:
            steps = decoder.measure_steps()
            timings = ", ".join(f"{size}: {ms:.0f}" for size, ms in steps.items())
            log.info("decode step ms by batch size {%s}", timings)
        except LanguageModelError:
            log.warning("timing decode steps failed; admission waits for real turns", exc_info=True)
    llm_s = time.monotonic() - started
    started = time.monotonic()
    try:
        for _audio in tts.synthesize("Hello."):
            pass
    except Exception:
        log.warning("TTS warm-up failed; the first reply audio may be slow", exc_info=True)
    log.info("warm-up: LLM %.2f s, TTS %.2f s", llm_s, time.monotonic() - started)


def read_session_prompt(
    llm: LanguageModel, instructions: str, tools: list[FunctionTool], tool_choice: str, timeout_s: float = 120.0
) -> None:
    """Read the prompt a session with ``instructions`` and ``tools`` starts with (the system turn
    its engine renders, tool schemas included) into the shared LLM, and wait until it is read (at
    most ``timeout_s`` s), so that the first call with that session finds it read, as every later
    call does. Done by an engine with a ``prepare`` method (llama.cpp); others ignore it. A failure
    is logged, never fatal: the first call then reads the prompt itself."""
    prepare = getattr(llm, "prepare", None)
    if prepare is None:
        return
    started = time.monotonic()
    options = GenerationOptions(tools=list(tools), tool_choice=tool_choice)
    try:
        warm = prepare([ChatMessage("system", instructions)], options)
    except Exception:
        log.warning("reading the session prompt at start-up failed; its first call reads it", exc_info=True)
        return
    if warm is None:
        log.info("session prompt not read at start-up: held already, or longer than a warm may be")
        return
    try:
        while not warm.done and time.monotonic() - started < timeout_s:
            time.sleep(0.02)
        read = warm.done
    finally:
        warm.cancel()  # the cells stay in the prefix sequence for the calls that share them
    seconds = time.monotonic() - started
    if read:
        log.info("session prompt (%d tools) read at start-up in %.2f s", len(tools), seconds)
    else:
        log.warning("session prompt not read within %.0f s at start-up; its first call reads the rest", seconds)
