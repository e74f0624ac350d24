"""PipelineUnit: one caller's session, its stage threads, queues, cancel scope and tracks."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Optional

import numpy as np

from gateway.config import GatewayConfig
from gateway.media.audio_pacer import PlayoutPacer
from gateway.media.outbound import FrameHook, OutputAudioTrack
from gateway.media.playout import PlayoutBuffer, PlayoutEvents
from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions, ModelSet
from gateway.pipeline.cancel import CancelScope
from gateway.pipeline.chain import StageChain, StageFactory
from gateway.pipeline.events import (
    Interruption,
    PipelineEvent,
    PlaybackStarted,
    PlaybackStopped,
    ResponseFinished,
    ResponseInterrupted,
    SpeechStarted,
    TurnLatencyMeasured,
)
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import AudioIn, ClearInput, CommitInput, ResponseRequest, SessionEnd
from gateway.pipeline.turn import TurnDetection
from gateway.pool.session_state import SessionState

log = logging.getLogger(__name__)

EventSink = Callable[[PipelineEvent], None]


class UnitState(enum.StrEnum):
    """A unit's lifecycle state; the value is what ``GET /v1/pool`` and ``vg_pool_units`` show.

    ``idle``: free, the only state a call can claim. ``active``: serving a call. ``draining``: the
    call ended and its SESSION_END marker is passing the stages. ``stuck``: the drain overran
    ``drain_timeout_s``; stage threads are being rebuilt, and the unit is ``idle`` after.
    """

    IDLE = "idle"
    ACTIVE = "active"
    DRAINING = "draining"
    STUCK = "stuck"


class PipelineUnit:
    """One pooled session slot: VAD -> STT -> LLM -> TTS threads, their queues, a CancelScope,
    a SessionState, a PlayoutBuffer and (per call) an OutputAudioTrack.

    Lifecycle: ``idle`` --claim--> ``active`` --begin_drain--> ``draining`` --own SESSION_END out of
    the last stage--> ``idle``. A drain that exceeds ``drain_timeout_s`` quarantines the unit
    (``stuck``): its threads and queues are replaced and a probe marker is run through the new ones;
    when it comes out the unit is ``idle`` again.

    Thread use: ``claim``, ``begin_drain`` and the control methods run on the event loop; stage
    threads call ``notify``, ``is_current``, ``on_speech_started`` and ``playout``. The control
    methods are ``gateway.realtime.control.PipelineControl``, what the call's Realtime session asks.
    """

    def __init__(
        self,
        index: int,
        models: ModelSet,
        config: GatewayConfig,
        loop: asyncio.AbstractEventLoop,
        stage_factories: Optional[dict[str, StageFactory]] = None,
    ) -> None:
        self.index = index
        self.models = models
        self.config = config
        self._loop = loop
        self._factories = stage_factories or {}
        self.scope = CancelScope()
        self._lock = threading.Lock()
        self.state = UnitState.IDLE
        self.call_id: Optional[str] = None
        self.session_state = SessionState.for_call(None, config)
        self._sink: Optional[EventSink] = None
        self._drain_token: Optional[str] = None
        self._drain_timer: Optional[asyncio.TimerHandle] = None
        self.drain_started_at: Optional[float] = None
        self.stuck_since: Optional[float] = None
        self.close_reason: Optional[str] = None
        self.recoveries = 0
        self.sessions_served = 0
        self.on_state_change: Callable[[PipelineUnit], None] = lambda unit: None
        self.on_recovery: Callable[[PipelineUnit], None] = lambda unit: None  # each rebuild of a stuck unit
        # Frame hooks (metrics): a caller frame in (samples, Hz); an outbound frame (reply audio, late).
        self.on_input_frame: Callable[[int, int], None] = lambda samples, rate: None
        self.on_output_frame: FrameHook = lambda audio, late: None
        self._latency: dict[int, TurnLatency] = {}
        self._build()

    # ----- construction -----
    def _build(self) -> None:
        self.playout = PlayoutBuffer(self.scope.is_current, self.config.playout_buffer_ms)
        self.chain = StageChain.build(self, self.models, self._marker_out, self._factories)
        self.chain.start(f"unit{self.index}")

    # ----- StageContext -----
    @property
    def turn(self) -> TurnDetection:
        """The session's TurnDetection (Realtime ``turn_detection``). The VAD thread reads it per
        audio message, so a ``session.update`` applies from the next chunk on."""
        return self.session_state.turn

    @property
    def language(self) -> str:
        """ISO 639-1 code for STT (``audio.input.transcription.language``; "en" by default)."""
        return self.session_state.language

    def is_current(self, generation: int) -> bool:
        """True while ``generation`` is neither cancelled nor superseded (see CancelScope); stage
        threads call it to drop a cancelled reply's tokens and audio."""
        return self.scope.is_current(generation)

    def notify(self, event: PipelineEvent) -> None:
        """Deliver ``event`` to the session's sink on the event loop (thread-safe)."""
        try:
            self._loop.call_soon_threadsafe(self._deliver, event)
        except RuntimeError:
            pass  # the loop is closed: the process is shutting down

    def _deliver(self, event: PipelineEvent) -> None:
        if event.call_id != self.call_id or self.state is not UnitState.ACTIVE or self._sink is None:
            return  # late event of an ended session: it must not reach the next caller
        if isinstance(event, ResponseFinished):
            self.scope.finish(event.generation)
            self.session_state.touch()
        try:
            self._sink(event)
        except Exception:
            log.exception("event sink failed on %s", type(event).__name__)

    def on_speech_started(self, event: SpeechStarted) -> None:
        """Called by the VAD thread when caller speech is confirmed: barge in (cancel the reply and
        drop its unplayed audio) if one is going, then report ``event`` and the interruption."""
        self.session_state.touch()
        interruption = self.interrupt() if self.session_state.turn.interrupt_response else None
        self.notify(event)
        if interruption is not None:
            self.notify(ResponseInterrupted(event.call_id, interruption=interruption))

    # ----- claim / release -----
    def claim(self, call_id: str, sink: EventSink) -> bool:
        """Take this unit for a new session if it is idle. Synchronous: nothing can run between the
        check and the set."""
        with self._lock:
            if self.state is not UnitState.IDLE:
                return False
            self.state = UnitState.ACTIVE
            self.call_id = call_id
            self.session_state = SessionState.for_call(call_id, self.config)
            self.scope.cancel()  # nothing of an earlier session is live in this one
            self._sink = sink
            self.close_reason = None
            self.sessions_served += 1
        self.on_state_change(self)
        return True

    def new_output_track(self) -> OutputAudioTrack:
        """A fresh outbound track on this unit's playout buffer (one per call: pts restart at 0)."""
        return OutputAudioTrack(
            self.playout,
            on_events=self._on_playout_events,
            on_frame=lambda audio, late: self.on_output_frame(audio, late),
        )

    def new_audio_pacer(self, on_audio: Callable[[int, np.ndarray], None]) -> PlayoutPacer:
        """A reader of this unit's playout buffer for an event transport (WebSocket): audio goes to
        ``on_audio(generation, samples)`` ahead of real time, playback events as the track's do.
        One per session; its ``stop()`` must run before the unit drains."""
        return PlayoutPacer(self.playout, on_audio, self._on_playout_events)

    def begin_drain(self, reason: str) -> bool:
        """Quarantine-drain: stop taking input, cancel, flush, send SESSION_END through every stage.

        Returns False if the unit was not active (a second hang-up of the same call is harmless).
        """
        with self._lock:
            if self.state is not UnitState.ACTIVE:
                return False
            self.state = UnitState.DRAINING
            self.close_reason = reason
            self._sink = None
            token = self._drain_token = self.call_id or ""  # an active unit always has a call id
            self.drain_started_at = time.monotonic()
        self.scope.cancel()
        self.playout.clear()
        self.chain.flush()
        self.chain.send_marker(token)
        self._arm_drain_timer(token)
        self.on_state_change(self)
        return True

    def _arm_drain_timer(self, token: str) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        self._drain_timer = self._loop.call_later(self.config.drain_timeout_s, self._drain_timed_out, token)

    def _marker_out(self, marker: SessionEnd) -> None:
        """The last stage passed on a SESSION_END (TTS thread)."""
        with self._lock:
            if self.state not in (UnitState.DRAINING, UnitState.STUCK) or marker.call_id != self._drain_token:
                return  # a marker of an earlier session never releases a later one
            self.state = UnitState.IDLE
            self.call_id = None
            self.session_state = SessionState.for_call(None, self.config)
            self._drain_token = None
            self.drain_started_at = None
            self.stuck_since = None
            self._latency.clear()
        self.playout.clear()
        self._loop.call_soon_threadsafe(self._after_idle)

    def _after_idle(self) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        self.on_state_change(self)

    def _drain_timed_out(self, token: str) -> None:
        with self._lock:
            if self._drain_token != token or self.state not in (UnitState.DRAINING, UnitState.STUCK):
                return
            if self.state is UnitState.DRAINING:
                self.stuck_since = time.monotonic()
            self.state = UnitState.STUCK
        log.warning("unit %d did not drain in %.1f s: quarantined, rebuilding", self.index, self.config.drain_timeout_s)
        self.on_state_change(self)
        self._recover()

    def _recover(self) -> None:
        """Replace the stage threads and queues; the unit is idle once a probe marker passes them all.

        The old threads are retired: whatever they are blocked in, their output goes to queues no
        one reads, and audio of their generation is stale.
        """
        self.recoveries += 1
        self.on_recovery(self)
        self.chain.retire()
        self.playout.close()
        self.scope.cancel()
        self._build()
        token = f"recover-{uuid.uuid4().hex[:8]}"
        with self._lock:
            self._drain_token = token
        self.chain.send_marker(token)
        self._arm_drain_timer(token)

    def close(self) -> None:
        """Tell the stage threads to stop (process shutdown); see :meth:`join`. A drain still under
        way is not timed out later (no quarantine, no rebuild: the threads are going)."""
        timer, self._drain_timer = self._drain_timer, None
        if timer is not None:
            try:
                self._loop.call_soon_threadsafe(timer.cancel)  # close() may run in a worker thread
            except RuntimeError:
                pass  # the loop is closed: the timer will never fire
        self.chain.retire()
        self.playout.close()

    def join(self, timeout: float) -> bool:
        """Wait for the stage threads to end. A thread still inside a model call when the
        interpreter exits can abort the process (C++ runtimes tear down under it)."""
        return self.chain.join(timeout)

    # ----- input -----
    def submit_audio(self, samples: np.ndarray, received_at: float) -> None:
        """Caller audio, int16 mono at the VAD's rate (from the inbound reader)."""
        if self.state is UnitState.ACTIVE and self.call_id is not None:
            self.on_input_frame(samples.size, self.models.vad.sample_rate)
            self.chain.vad_in.put(AudioIn(self.call_id, samples=samples, received_at=received_at))

    # ----- control: PipelineControl (the Realtime session calls these on the event loop) -----
    def _active_session(self) -> Optional[str]:
        """The call id while the unit serves a call; None while it drains, is stuck or idle, so
        that a late request of an ended call can never act on the unit (or the next caller)."""
        return self.call_id if self.state is UnitState.ACTIVE else None

    def current_settings(self) -> SessionState:
        """A copy of the call's settings (instructions, max_tokens, speed, language, turn); right
        after the claim, the configured defaults."""
        state = self.session_state
        return dataclasses.replace(state, turn=dataclasses.replace(state.turn))

    def update_settings(
        self,
        *,
        instructions: str,
        max_tokens: int,
        speed: float,
        language: str,
        turn: TurnDetection,
        voice: Optional[str] = None,
    ) -> None:
        """A ``session.update`` of the call: the VAD thread reads the new ``turn`` from its next
        audio chunk (the object is replaced, never changed under it), STT the new ``language``,
        later responses ``max_tokens`` and ``speed``. Ignored unless a call is served."""
        if self._active_session() is None:
            return
        state = self.session_state
        state.instructions = instructions
        state.max_tokens = max_tokens
        state.speed = speed
        state.voice = voice
        state.language = language
        state.turn = dataclasses.replace(turn)

    def keep_alive(self) -> None:
        """The call has work pending (an armed ``idle_timeout_ms``): restart its idle watchdog."""
        if self._active_session() is not None:
            self.session_state.touch()

    def commit_input(self) -> None:
        """Manual turn: end the caller's turn now."""
        session = self._active_session()
        if session is not None:
            self.chain.vad_in.put(CommitInput(session))

    def clear_input(self) -> None:
        """Drop the caller audio buffered so far."""
        session = self._active_session()
        if session is not None:
            self.chain.vad_in.put(ClearInput(session))

    def create_response(
        self,
        messages: list[ChatMessage],
        audio: bool = True,
        *,
        max_tokens: Optional[int] = None,
        latency: Optional[TurnLatency] = None,
        tools: Optional[list[FunctionTool]] = None,
        tool_choice: str = "auto",
    ) -> int:
        """Queue a response to ``messages`` for the LLM (``audio`` False: text only; ``max_tokens``
        its own cap, None: the call's; ``tools``/``tool_choice`` what the model may call, as
        ``GenerationOptions`` takes them); returns its generation id (an earlier reply becomes stale).

        Raises RuntimeError when the unit is not serving a call (draining, stuck or idle)."""
        session = self._active_session()
        if session is None:
            raise RuntimeError(f"unit {self.index} is {self.state.value}: no response can start")
        generation = self.scope.begin()
        latency = latency or TurnLatency()
        latency.mark("response_requested", time.monotonic())
        self._latency = {generation: latency}
        self.session_state.touch()
        self.chain.llm_in.put(
            ResponseRequest(
                session,
                generation=generation,
                messages=messages,
                max_tokens=self.session_state.max_tokens if max_tokens is None else max_tokens,
                audio=audio,
                speed=self.session_state.speed,
                voice=self.session_state.voice,
                latency=latency,
                options=GenerationOptions(tools=list(tools or []), tool_choice=tool_choice),
            )
        )
        return generation

    def interrupt(self) -> Optional[Interruption]:
        """Cancel the response being generated or played and drop its unplayed audio at once.

        Returns None when nothing was going on (or the unit is not serving a call)."""
        if self._active_session() is None:
            return None
        generation = self.scope.current
        was_live = self.scope.live
        cleared = self.playout.clear()
        if not was_live and cleared is None:
            return None
        self.scope.cancel()
        if cleared is None:
            return Interruption(generation, audio_cleared=False)
        return Interruption(cleared[0], audio_cleared=True, played_ms=cleared[1], heard_text=cleared[2])

    # ----- output track events (event loop) -----
    def _on_playout_events(self, events: PlayoutEvents) -> None:
        session = self.call_id
        if session is None:
            return
        if events.started is not None:
            latency = self._latency.get(events.started)
            if latency is not None:
                latency.mark("first_audio_frame", time.monotonic())
                self._deliver(TurnLatencyMeasured(session, generation=events.started, latency_ms=latency.as_ms()))
            self._deliver(PlaybackStarted(session, generation=events.started))
        if events.stopped is not None:
            self.session_state.touch()
            self._deliver(PlaybackStopped(session, generation=events.stopped[0], played_ms=events.stopped[1]))

    # ----- observability -----
    def snapshot(self) -> dict:
        """This unit's entry in ``GET /v1/pool`` ``units``; read without the lock (a moment's view).

        Keys: ``index``; ``state`` (a UnitState value); ``call_id`` (None when idle or stuck);
        ``claimed_at`` (Unix s) and ``active_for_s`` while active; ``draining_for_s`` and
        ``stuck_for_s`` in those states (else None); ``close_reason``; ``sessions_served``;
        ``recoveries``; ``queued`` (messages waiting at VAD, STT, LLM, TTS); ``playout_ms`` (reply
        audio buffered, ms). Durations are seconds rounded to 1 ms.
        """
        now = time.monotonic()
        return {
            "index": self.index,
            "state": self.state.value,
            "call_id": self.call_id if self.state is not UnitState.STUCK else None,
            "claimed_at": self.session_state.claimed_at_epoch if self.state is UnitState.ACTIVE else None,
            "active_for_s": round(now - self.session_state.claimed_at, 3) if self.state is UnitState.ACTIVE else None,
            "draining_for_s": round(now - self.drain_started_at, 3)
            if self.state is UnitState.DRAINING and self.drain_started_at
            else None,
            "stuck_for_s": round(now - self.stuck_since, 3)
            if self.state is UnitState.STUCK and self.stuck_since
            else None,
            "close_reason": self.close_reason,
            "sessions_served": self.sessions_served,
            "recoveries": self.recoveries,
            "queued": [len(q) for q in self.chain.queues],
            "playout_ms": round(self.playout.buffered_ms, 1),
        }
