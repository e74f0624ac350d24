"""UnitLease: one call's hold on a claimed PipelineUnit, what every transport and the Realtime
session use instead of the unit itself.

``UnitPool.claim(call_id, sink)`` returns a lease. It implements
``gateway.realtime.control.PipelineControl`` and the narrow queries the transports, the watchdogs
and the graceful drain need (:meth:`busy`, :meth:`touch`, :meth:`idle_for_s`, :attr:`input_rate`),
and it goes inert once the unit is released: after :meth:`release` (or once the unit has moved
on to another call) every control call is ignored, every query reads "nothing going on", and
:meth:`create_response` raises RuntimeError. The "is this still my call" guard is written once,
here: a late request of an ended call can never act on the next caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional

import numpy as np

from gateway.media.audio_pacer import PlayoutPacer
from gateway.media.outbound import OutputAudioTrack
from gateway.media.recording import StereoRecording
from gateway.models.base import ChatMessage, FunctionTool
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.events import Interruption
from gateway.pipeline.latency import TurnLatency
from gateway.pool.unit import PipelineUnit, UnitState


class UnitLease:
    """The hold of call ``call_id`` on ``unit`` (made by :meth:`UnitPool.claim`). All methods run
    on the event loop."""

    def __init__(self, unit: PipelineUnit, call_id: str) -> None:
        self._unit = unit
        self.call_id = call_id
        self._released = False

    # ----- whose unit -----
    @property
    def index(self) -> int:
        """The unit's place in the pool (``GET /v1/pool`` ``units[].index``)."""
        return self._unit.index

    @property
    def live(self) -> bool:
        """True while the unit serves this call (claimed, not released)."""
        unit = self._unit
        return not self._released and unit.state is UnitState.ACTIVE and unit.call_id == self.call_id

    def release(self, reason: str) -> bool:
        """End the hold: the unit quarantine-drains (``reason`` an EndReason value, shown as its
        ``close_reason``). Returns False when already released; from now on the lease is inert."""
        if not self.live:
            self._released = True
            return False
        self._released = True
        self._unit.recording = None  # the next caller's audio is not this call's
        return self._unit.begin_drain(reason)

    # ----- queries -----
    @property
    def input_rate(self) -> int:
        """The sample rate (Hz) caller audio is submitted at (the VAD model's)."""
        return self._unit.models.vad.sample_rate

    def busy(self) -> bool:
        """True while a response is being generated or its reply audio is still to be played;
        False while the playout is suspended (a call on hold: nobody waits for the reply now)."""
        unit = self._unit
        return self.live and not unit.playout.suspended and (unit.scope.live or unit.playout.buffered_ms > 0)

    def touch(self) -> None:
        """Caller activity (speech, a key press) or a response: the idle timeout starts again."""
        if self.live:
            self._unit.call_state.touch()

    def idle_for_s(self) -> float:
        """Seconds since the call's last activity (0 once released)."""
        return time.monotonic() - self._unit.call_state.last_activity if self.live else 0.0

    # ----- audio -----
    def submit_audio(self, samples: np.ndarray, received_at: float) -> None:
        """Caller audio, int16 mono at :attr:`input_rate`; dropped once released."""
        if self.live:
            self._unit.submit_audio(samples, received_at)

    def record(self, recording: Optional[StereoRecording]) -> None:
        """Record the call's audio into ``recording`` from now on: caller audio as it is submitted,
        reply audio as it is played out (None: stop). Ignored once released; :meth:`release`
        detaches it."""
        if self.live:
            self._unit.recording = recording

    def new_output_track(self) -> OutputAudioTrack:
        """A fresh outbound track on the unit's playout buffer (WebRTC; one per call). It must be
        stopped before the lease is released."""
        return self._unit.new_output_track()

    def suspend_playout(self, on: bool) -> None:
        """The caller cannot hear the reply now (``on``: a SIP hold), or hears again: the output
        track keeps its 20 ms clock but takes no reply audio while suspended, so the reply goes on
        from where it stopped, a new one waits too, and no playback event is reached in
        between. Ignored once released."""
        if self.live:
            self._unit.suspend_playout(on)

    def new_audio_pacer(self, on_audio: Callable[[int, np.ndarray], None]) -> PlayoutPacer:
        """A reader of the unit's playout buffer for an event transport (WebSocket); its
        ``stop()`` must run before the lease is released."""
        return self._unit.new_audio_pacer(on_audio)

    # ----- PipelineControl -----
    def current_settings(self) -> CallSettings:
        """The call's settings; right after the claim, the configured defaults."""
        return self._unit.current_settings()

    def apply_settings(self, settings: CallSettings) -> None:
        """See ``PipelineControl.apply_settings``; ignored once released."""
        if self.live:
            self._unit.apply_settings(settings)

    def read_ahead(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: Optional[int],
        tools: list[FunctionTool],
        tool_choice: str,
        audio: bool = True,
        reply: bool = True,
    ) -> None:
        """See ``PipelineControl.read_ahead``; ignored once released."""
        if self.live:
            self._unit.read_ahead(
                messages, max_tokens=max_tokens, tools=tools, tool_choice=tool_choice, audio=audio, reply=reply
            )

    def keep_alive(self) -> None:
        """See ``PipelineControl.keep_alive``; ignored once released."""
        if self.live:
            self._unit.keep_alive()

    def commit_input(self) -> None:
        """See ``PipelineControl.commit_input``; ignored once released."""
        if self.live:
            self._unit.commit_input()

    def clear_input(self) -> None:
        """See ``PipelineControl.clear_input``; ignored once released."""
        if self.live:
            self._unit.clear_input()

    def create_response(
        self,
        messages: list[ChatMessage],
        audio: bool = True,
        *,
        max_tokens: Optional[int] = None,
        latency: Optional[TurnLatency] = None,
        tools: Optional[list[FunctionTool]] = None,
        tool_choice: str = "auto",
        turn_cuts: bool = True,
    ) -> int:
        """See ``PipelineControl.create_response``. Raises RuntimeError once released."""
        if not self.live:
            raise RuntimeError(f"call {self.call_id} no longer holds unit {self.index}: no response can start")
        return self._unit.create_response(
            messages,
            audio,
            max_tokens=max_tokens,
            latency=latency,
            tools=tools,
            tool_choice=tool_choice,
            turn_cuts=turn_cuts,
        )

    def interrupt(self) -> Optional[Interruption]:
        """See ``PipelineControl.interrupt``; None once released."""
        return self._unit.interrupt() if self.live else None
