"""PipelineUnit: one call's slot in the pool: its stage threads, queues, cancel scope and tracks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Optional

import numpy as np

from gateway.config import GatewayConfig
from gateway.media.audio_pacer import FRAME_SAMPLES, PlayoutPacer
from gateway.media.echo_reference import EchoReference
from gateway.media.outbound import FrameHook, OutputAudioTrack
from gateway.media.playout import SAMPLE_RATE, PlayoutBuffer, PlayoutEvents
from gateway.media.recording import StereoRecording
from gateway.media.thinking_cue import ThinkingCue
from gateway.models.base import ModelSet, ScoredTranscript
from gateway.pipeline.cancel import CancelScope
from gateway.pipeline.chain import StageChain, StageFactory
from gateway.pipeline.events import (
    PipelineEvent,
    PlaybackStarted,
    PlaybackStopped,
    ResponseFinished,
    ResponseInterrupted,
    SpeechResumed,
    SpeechStarted,
    TranscriptionCompleted,
    TranscriptionFailed,
    TurnLatencyMeasured,
)
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import AudioIn, BargeInHeard
from gateway.pool.call_state import CallState
from gateway.pool.lifecycle import UnitState
from gateway.pool.preemptive import PreemptiveReplies
from gateway.pool.read_ahead import LatestPromptWarm, PromptReadAhead
from gateway.pool.thinking import prepare_filler
from gateway.pool.unit_control import UnitControl

__all__ = ["EventSink", "PipelineUnit", "UnitState"]

log = logging.getLogger(__name__)

EventSink = Callable[[PipelineEvent], None]


class PipelineUnit(UnitControl):
    """One pooled call slot: VAD -> STT -> LLM -> TTS threads, their queues, a CancelScope,
    a CallState, a PlayoutBuffer and (per call) an OutputAudioTrack.

    Lifecycle (claim, quarantine-drain, stuck recovery): :class:`~gateway.pool.lifecycle.UnitLifecycle`;
    the control methods (what the call's Realtime session asks): :class:`~gateway.pool.unit_control.UnitControl`;
    this class provides the stage side. A call holds the unit through a
    :class:`~gateway.pool.lease.UnitLease` (``UnitPool.claim``), never the unit itself.

    Thread use: ``claim``, ``begin_drain`` and the control methods run on the event loop; stage
    threads read ``settings`` and call ``notify``, ``is_current``, ``on_speech_started``,
    ``playout`` and the barge-in hooks (``pause_reply``, ``resume_reply``, ``barge_in_heard``,
    ``echo_share``). The control methods are ``gateway.realtime.control.PipelineControl``, what
    the call's Realtime session asks.
    """

    def __init__(
        self,
        index: int,
        models: ModelSet,
        config: GatewayConfig,
        loop: asyncio.AbstractEventLoop,
        stage_factories: Optional[dict[str, StageFactory]] = None,
    ) -> None:
        super().__init__(index, config, loop)
        self.models = models
        self._factories = stage_factories or {}
        self.scope = CancelScope()
        self.call_state = CallState.for_call(None, config)
        self._sink: Optional[EventSink] = None
        # Frame hooks (metrics): a caller frame in (samples, Hz); an outbound frame (reply audio, late).
        self.on_input_frame: Callable[[int, int], None] = lambda samples, rate: None
        self.on_output_frame: FrameHook = lambda audio, late: None
        self._latency: dict[int, TurnLatency] = {}
        self._uncut: Optional[int] = None  # the generation the caller's speech leaves alone (out of band)
        # The call's recording (``UnitLease.record``; None: not recorded): caller audio as it is
        # submitted, reply audio as the track or pacer plays it out. Event loop only.
        self.recording: Optional[StereoRecording] = None
        # The call's instructions and tools being read ahead by the LLM (apply_settings); let go
        # when they change and when the call ends, so nothing is read for a caller who has gone.
        self.instructions_read = LatestPromptWarm(loop)
        # The prompt of a reply to the turn so far, read ahead (read_ahead) off the event loop: let
        # go when a different response starts, a newer draft comes or the call ends.
        self.prompt_read = PromptReadAhead(loop)
        # The reply started from the turn so far at the caller's pause, held until the turn is
        # confirmed (gateway.pool.preemptive), and the outcome counts of such replies.
        self.preemptive = PreemptiveReplies()
        # The pool's load meter: how many other units write a reply now (is this turn asked on a
        # quiet box?), and each answered turn's first clause (turn end -> first audio, s).
        self.replying_elsewhere: Callable[[], int] = lambda: 0
        self.on_first_audio: Callable[[float, bool], None] = lambda first_clause_s, quiet: None
        self._quiet_turn = False
        # When the playout was last suspended or resumed (a call on hold; monotonic s): a reply asked
        # before then waited out the hold, so its first audio is not timed.
        self._suspension_changed_at: Optional[float] = None
        self._build()

    # ----- construction -----
    def _build(self) -> None:
        self.playout = PlayoutBuffer(self.scope.is_current, self.config.playout_buffer_ms)
        self.echo_reference = EchoReference()
        self.cue = ThinkingCue()
        self.chain = StageChain.build(self, self.models, self._marker_out, self._factories)
        self.chain.start(f"unit{self.index}")

    # ----- StageContext (``settings``: UnitControl's) -----
    def is_current(self, generation: int) -> bool:
        """True while ``generation`` is neither cancelled nor superseded (see CancelScope); stage
        threads call it to drop a cancelled reply's tokens and audio."""
        return self.scope.is_current(generation)

    def notify(self, event: PipelineEvent) -> None:
        """Deliver ``event`` to the call's sink on the event loop (thread-safe)."""
        try:
            self._loop.call_soon_threadsafe(self._deliver, event)
        except RuntimeError:
            pass  # the loop is closed: the process is shutting down

    def _deliver(self, event: PipelineEvent) -> None:
        if event.call_id != self.call_id or self.state is not UnitState.ACTIVE or self._sink is None:
            return  # late event of an ended call: it must not reach the next caller
        if isinstance(event, SpeechResumed):  # the caller went on after the pause: not the turn's reply
            self._discard_preemptive()
        if self.preemptive.keep(event):  # a held preemptive reply's, or a discarded one's
            return
        if isinstance(event, ResponseFinished):
            self.scope.finish(event.generation)
            self.call_state.touch()
            if not event.tool_calls:
                self.cue.stop()  # with calls, the cue goes on while the client runs them
        try:
            self._sink(event)
        except Exception:
            log.exception("event sink failed on %s", type(event).__name__)
        if isinstance(event, (TranscriptionCompleted, TranscriptionFailed)):
            self._discard_preemptive()  # the turn's transcript came and no response used it

    def on_speech_started(self, event: SpeechStarted) -> None:
        """Called by the VAD thread when caller speech is confirmed: barge in (cancel the reply and
        drop its unplayed audio) if one is going, then report ``event`` and the interruption."""
        self.call_state.turned()
        self.cue.stop()
        event.replies_seen = self.scope.current  # one asked after this is not cut here: the session cuts it
        cuts = self.settings.turn.interrupt_response and self.scope.current != self._uncut
        interruption = self.interrupt() if cuts else None
        self.notify(event)
        if interruption is not None:
            self.notify(ResponseInterrupted(event.call_id, interruption=interruption))

    # ----- barge-in hooks (stage threads; the decision is the VAD's, gateway.pipeline.bargein) -----
    def pause_reply(self) -> bool:
        """Hold the reply's audio where it is while speech under it is judged; False when none plays."""
        return self._active_call() is not None and self.scope.current != self._uncut and self.playout.pause()

    def resume_reply(self) -> None:
        """Play the held reply on (the speech under it was a backchannel or a noise)."""
        self.playout.resume()

    def suspend_playout(self, on: bool) -> None:
        """The caller cannot hear (``on``: a SIP hold) or hears again: the reply audio waits in the
        playout buffer where it stopped (``PlayoutBuffer.suspend``). Ignored unless a call is served."""
        if self._active_call() is None or self.playout.suspended == on:
            return
        self.playout.suspend(on)
        self._suspension_changed_at = time.monotonic()

    def barge_in_heard(self, call_id: str, speculation: int, heard: ScoredTranscript) -> None:
        """What a barge-in probe heard, handed to the VAD stage (thread-safe)."""
        self.chain.vad_in.put(
            BargeInHeard(
                call_id, speculation=speculation, transcript=heard.text, words=heard.words, trusted=heard.trusted
            )
        )

    def echo_share(self, audio: np.ndarray, end_time: float) -> float:
        """How much of the caller ``audio`` is the reply's own echo (see EchoReference.echo_share)."""
        return self.echo_reference.echo_share(audio, end_time)

    def reply_words_since(self, since: float) -> list[str]:
        """The words of reply audio played since ``since`` (monotonic s): what may echo back."""
        return self.playout.words_played_since(since)

    # ----- lifecycle: the stage side (gateway.pool.lifecycle) -----
    def _on_claim(self, call_id: str, sink: EventSink) -> None:
        self.call_state = CallState.for_call(call_id, self.config)
        self.preemptive.new_call()
        self.scope.cancel()  # nothing of an earlier call is live in this one
        self.cue.stop()
        self.playout.suspend(False)
        self._suspension_changed_at = None
        prepare_filler(self)
        self._sink = sink

    def _stop_call(self, under_lock: bool) -> None:
        if under_lock:
            self._sink = None
            return
        self._discard_preemptive()
        self.scope.cancel()
        self.cue.stop()
        self._let_go_of_warm()
        self.prompt_read.let_go()
        self.playout.suspend(False)
        self.playout.clear()
        self.chain.flush()

    def _send_marker(self, token: str) -> None:
        self.chain.send_marker(token)

    def _on_released(self, under_lock: bool) -> None:
        if under_lock:
            self.call_state = CallState.for_call(None, self.config)
            self._latency.clear()
            self.recording = None
        else:
            self.cue.stop()
            self.playout.clear()

    def _rebuild(self) -> None:
        self.chain.retire()
        self.playout.close()
        self.cue.stop()
        self.scope.cancel()
        self._build()

    def _retire(self) -> None:
        self.chain.retire()
        self.playout.close()

    def new_output_track(self) -> OutputAudioTrack:
        """A fresh outbound track on this unit's playout buffer (one per call: pts restart at 0)."""
        return OutputAudioTrack(
            self.playout,
            on_events=self._on_playout_events,
            on_frame=lambda audio, late: self.on_output_frame(audio, late),
            echo_reference=self.echo_reference,
            cue=self.cue,
            on_samples=self._record_reply,
        )

    def _record_reply(self, samples: np.ndarray, played_at: float) -> None:
        if self.recording is not None:
            self.recording.assistant(samples, SAMPLE_RATE, played_at)

    def _cut_reply(self, at: float) -> None:
        if self.recording is not None:
            self.recording.cut_assistant(at)

    def new_audio_pacer(self, on_audio: Callable[[int, np.ndarray], None]) -> PlayoutPacer:
        """A reader of this unit's playout buffer for an event transport (WebSocket): audio goes to
        ``on_audio(generation, samples)`` ahead of real time, playback events as the track's do,
        and each 20 ms frame of it to ``on_output_frame`` as a track's audio frame (never late:
        the client paces it). One per call; its ``stop()`` must run before the unit drains."""
        return PlayoutPacer(
            self.playout, on_audio, self._on_playout_events, on_played=self._sent_reply, on_unheard=self._cut_reply
        )

    def _sent_reply(self, samples: np.ndarray, played_at: float) -> None:
        for _ in range(samples.size // FRAME_SAMPLES):
            self.on_output_frame(True, False)
        self._record_reply(samples, played_at)

    def run_in_thread(self, work: Callable[[], None]) -> None:
        """Run ``work`` in the event loop's worker threads (a model call off the loop; on the loop)."""
        self._loop.run_in_executor(None, work)

    def join(self, timeout: float) -> bool:
        """Wait for the stage threads to end. A thread still inside a model call when the
        interpreter exits can abort the process (C++ runtimes tear down under it)."""
        return self.chain.join(timeout)

    # ----- input -----
    def submit_audio(self, samples: np.ndarray, received_at: float) -> None:
        """Caller audio, int16 mono at the VAD's rate (from the inbound reader)."""
        if self.state is UnitState.ACTIVE and self.call_id is not None:
            self.on_input_frame(samples.size, self.models.vad.sample_rate)
            if self.recording is not None:
                self.recording.caller(samples, self.models.vad.sample_rate, time.monotonic())
            self.chain.vad_in.put(AudioIn(self.call_id, samples=samples, received_at=received_at))

    # ----- output track events (event loop) -----
    def _on_playout_events(self, events: PlayoutEvents) -> None:
        call_id = self.call_id
        if call_id is None:
            return
        if events.started is not None:
            latency = self._latency.get(events.started)
            if latency is not None:
                latency.mark("first_audio_frame", time.monotonic())
                asked = latency.end_of_turn or latency.response_requested
                suspended = self._suspension_changed_at
                # a reply that waited out a hold is not timed: that wait was the caller's, not ours
                if asked is None or suspended is None or asked > suspended:
                    if asked is not None and latency.first_audio_frame is not None:
                        self.on_first_audio(latency.first_audio_frame - asked, self._quiet_turn)
                    measured = TurnLatencyMeasured(
                        call_id, generation=events.started, latency_ms=latency.as_ms(), detail_ms=latency.waits_ms()
                    )
                    self._deliver(measured)
            self._deliver(PlaybackStarted(call_id, generation=events.started))
        if events.stopped is not None:
            self.call_state.touch()
            self._deliver(PlaybackStopped(call_id, generation=events.stopped[0], played_ms=events.stopped[1]))

    # ----- observability: the stage side of snapshot (gateway.pool.lifecycle) -----
    def _claimed_at(self) -> tuple[float, float]:
        return self.call_state.claimed_at_epoch, self.call_state.claimed_at

    def _stage_view(self) -> dict:
        return {"queued": [len(q) for q in self.chain.queues], "playout_ms": round(self.playout.buffered_ms, 1)}
