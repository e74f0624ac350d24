"""Helpers the tests share (not fixtures: those are in conftest.py): a gateway served on loopback,
polling, transcript comparison (on the content words of ``gateway.loadgen.words``), and the faults
a test must not see (logged tracebacks, server_error events)."""

from __future__ import annotations

import asyncio
import difflib
import importlib
import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import numpy as np
import pytest
from aiohttp import web

from gateway.client import MicrophoneTrack, ReceivedAudio
from gateway.config import GatewayConfig
from gateway.loadgen.words import content_words, normal_words, words
from gateway.models.base import ModelSet
from gateway.server.runner import free_port, running_gateway

__all__ = [
    "QUESTION",
    "app_idle",
    "content_words",
    "free_port",
    "logged_faults",
    "missed_words",
    "require_module",
    "says",
    "serve",
    "server_errors",
    "similarity",
    "unavailable",
    "wait_until",
    "words",
]


# The question the call tests ask aloud. Whisper base hears the (deterministic) test voice say it
# right with margin: 60 of 60 noisy Piper draws and 18 of 18 gain/offset variants of the test
# audio, at 16 kHz and through G.711. "What is the capital of France?" was heard as "... of
# friends?" in ~1 of 15 noisy draws and in 1 of the 18 variants: a borderline word for a test.
# A test checks what it heard with ``says(heard, QUESTION)``: both words the question is about,
# "capital" and "Italy", must be heard (a word overlap let "What is the weather?" pass).
QUESTION = "What is the capital of Italy?"


def serve(
    config: GatewayConfig, models: Optional[ModelSet], **kwargs: Any
) -> AbstractAsyncContextManager[tuple[str, web.Application]]:
    """Run a gateway app on loopback for the test; ``async with`` yields (base_url, app)."""
    return running_gateway(config, models, **kwargs)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Wait on this thread (polling every 5 ms) until ``predicate()`` is true; its value at the end.
    For tests of stage threads and gates; on the event loop use :func:`wait_until`."""
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.005)
    return predicate()


async def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; returns its last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(interval)
    return predicate()


def app_idle(app: web.Application) -> bool:
    """True when every pool unit of the gateway ``app`` is idle."""
    from gateway.server.app_keys import POOL

    return all(unit.state.value == "idle" for unit in app[POOL].units)


def similarity(a: str, b: str) -> float:
    """Word-sequence similarity of two transcripts, 0..1 (difflib ratio). Function words count as
    much as the others: to check that a sentence was heard, use :func:`says`."""
    return difflib.SequenceMatcher(None, words(a), words(b)).ratio()


def missed_words(transcript: str, expected: str) -> list[str]:
    """The content words of ``expected`` that ``transcript`` does not have."""
    heard = set(normal_words(transcript))
    return [word for word in content_words(expected) if word not in heard]


def says(transcript: str, expected: str, misses: Optional[int] = None) -> bool:
    """Whether ``transcript`` says ``expected``: it has every content word of ``expected``
    (:func:`content_words`) but ``misses`` of them (default: one when there are three or more,
    else none). Raises ValueError for an ``expected`` without content words."""
    needed = content_words(expected)
    if not needed:
        raise ValueError(f"{expected!r} has no content words to check")
    allowed = (1 if len(needed) >= 3 else 0) if misses is None else misses
    return len(missed_words(transcript, expected)) <= allowed


def logged_faults(records: list[logging.LogRecord]) -> list[str]:
    """The records at WARNING or above that carry a traceback, as 'logger: message' lines."""
    return [
        f"{r.name}: {r.getMessage()[:300]}"
        for r in records
        if r.levelno >= logging.WARNING and (r.exc_info or "Traceback" in r.getMessage())
    ]


def server_errors(events: list[dict]) -> list[dict]:
    """The ``error`` events of a session that say the gateway failed (``server_error``), not the client."""
    return [
        e
        for e in events
        if e.get("type") == "error" and "server_error" in (e["error"].get("type"), e["error"].get("code"))
    ]


SETUP_RECORD = Path(__file__).resolve().parents[1] / ".venv" / "voice-gateway-setup"


def fully_set_up() -> bool:
    """Whether scripts/setup.sh ran here with ``--browser --services`` (it records its flags in
    :data:`SETUP_RECORD`): then every tool and package a test needs was installed."""
    try:
        flags = set(SETUP_RECORD.read_text().split())
    except OSError:
        return False
    return {"--browser", "--services"} <= flags


def unavailable(reason: str) -> None:
    """Skip a test whose optional dependency is missing, but fail it under CI (env ``CI`` set) or
    on a machine set up by ``scripts/setup.sh --browser --services``: there every dependency was
    installed, so a missing one is a broken install, and the README's test command skips nothing."""
    if os.environ.get("CI") or fully_set_up():
        why = "CI is set" if os.environ.get("CI") else "scripts/setup.sh --browser --services ran here"
        pytest.fail(f"{reason} ({why}: it should have installed it)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)  # also at a module's top (an import it needs)


def require_module(name: str, install: str) -> ModuleType:
    """``import name``, or :func:`unavailable` naming how to ``install`` it (pytest.importorskip
    that fails under CI). Import errors other than the module missing are raised as they are."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        unavailable(f"{name} is not installed ({exc}): {install}")
        raise  # unreachable: unavailable raises


class EchoingMicrophone(MicrophoneTrack):
    """A caller's microphone on a leg without echo cancellation (a speakerphone, a SIP bridge):
    it sends what :meth:`say` queued plus everything the client heard (``heard``), ``delay_ms``
    later and ``gain_db`` quieter, as a loudspeaker next to the microphone would.

    ``echoed_voiced``: how many 20 ms frames sent so far carried voiced echo (the heard audio's
    peak above ``VOICED_LEVEL``, as :meth:`ReceivedAudio.voiced_times` counts it), so a test can wait
    for an amount of echo sent rather than for wall-clock time (a loaded box makes the reply slower
    than real time)."""

    VOICED_LEVEL = 300  # int16 peak of a heard frame that is not silence

    def __init__(self, heard: ReceivedAudio, delay_ms: int = 150, gain_db: float = -12.0) -> None:
        super().__init__()
        self._heard = heard
        self._taken = 0
        self._line = np.zeros(delay_ms * 48, np.float32)  # 48 samples a ms
        self._gain = 10 ** (gain_db / 20)
        self.echoed_voiced = 0

    def next_samples(self) -> np.ndarray:
        own = super().next_samples().astype(np.float32)
        new = self._heard.frames[self._taken :]
        self._taken += len(new)
        if new:
            self._line = np.concatenate([self._line, *(frame.astype(np.float32) for frame in new)])
        echo, self._line = self._line[: own.size], self._line[own.size :]
        if echo.size < own.size:
            echo = np.concatenate([echo, np.zeros(own.size - echo.size, np.float32)])
        if echo.size and float(np.abs(echo).max()) > self.VOICED_LEVEL:
            self.echoed_voiced += 1
        return np.clip(own + self._gain * echo, -32768, 32767).astype(np.int16)
