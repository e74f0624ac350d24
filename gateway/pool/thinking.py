"""When a unit's thinking cue is due, and which sound it plays (``gateway.media.thinking_cue``).

A response that will be spoken, in a call whose ``thinking_cue`` is not ``off``, arms the cue
:attr:`GatewayConfig.thinking_cue_after_ms` after the end of the caller's turn (the VAD's
``end_of_turn``; a typed turn or a client's ``response.create``: the request). The first frame of
answer audio stops it (the track), as do barge-in, a cancel, a text-only response, a response
that ends without audio or calls, and the end of the call (the unit). A response that ends with
function calls leaves it armed: the client runs the tool, and its ``response.create`` arms the
next response, which keeps the cue's earlier due time and its place in the sound.

``filler`` plays the call's voice saying ``FILLER_TEXT``, synthesized once per voice (in a
worker thread, the first time a call wants it) and kept for the process; until it is ready
the tone plays instead.

The unit (``gateway.pool.unit.PipelineUnit``) calls these functions and is what they act on, seen
through :class:`CueHost`: this module imports nothing of the unit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional, Protocol

import numpy as np

from gateway.config import GatewayConfig
from gateway.media.thinking_cue import FILLER_TEXT, FillerCache, ThinkingCue, filler_audio, thinking_tone
from gateway.models.base import ModelSet
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.latency import TurnLatency

TONE = thinking_tone()
FILLERS = FillerCache()  # every unit of the process shares the voice's filler


class CueHost(Protocol):
    """What the thinking cue uses of its unit (``PipelineUnit`` has all of it)."""

    @property
    def cue(self) -> ThinkingCue:
        """The cue the unit's output track plays (``gateway.media.thinking_cue``)."""

    @property
    def settings(self) -> CallSettings:
        """The call's settings: ``thinking_cue`` ("off", "tone", "filler") and ``voice``."""

    @property
    def config(self) -> GatewayConfig:
        """The gateway's settings: ``thinking_cue_after_ms``."""

    @property
    def models(self) -> ModelSet:
        """The shared models: ``tts`` speaks the filler."""

    def run_in_thread(self, work: Callable[[], None]) -> None:
        """Run ``work`` off the event loop (the filler's synthesis)."""


def arm_cue(unit: CueHost, audio: bool, latency: TurnLatency) -> None:
    """Arm (or stop) ``unit``'s cue for a response just requested (``audio``: it is spoken)."""
    settings = unit.settings
    if not audio or settings.thinking_cue == "off":
        unit.cue.stop()
        return
    anchor = latency.end_of_turn or latency.response_requested or time.monotonic()
    due = anchor + unit.config.thinking_cue_after_ms / 1000
    filler = _filler(unit, settings.voice) if settings.thinking_cue == "filler" else None
    if filler is not None and filler.size:
        unit.cue.arm(filler, due, loop=False)
    else:
        unit.cue.arm(TONE, due, loop=True)


def prepare_filler(unit: CueHost) -> None:
    """If the call chose ``filler``: start making its voice's filler now, before it is needed."""
    if unit.settings.thinking_cue == "filler":
        _filler(unit, unit.settings.voice)


def _filler(unit: CueHost, voice: Optional[str]) -> Optional[np.ndarray]:
    """The filler of ``voice``, or None while it is being made (its making is started)."""
    tts = unit.models.tts
    key = (id(tts), voice)
    found = FILLERS.get(key)
    if found is None and FILLERS.claim(key):

        def make() -> np.ndarray:
            return filler_audio(tts.synthesize(FILLER_TEXT, voice=voice), tts.sample_rate)

        unit.run_in_thread(lambda: FILLERS.prepare(key, make))
    return found
