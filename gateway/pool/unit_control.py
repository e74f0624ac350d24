"""The control half of a :class:`~gateway.pool.unit.PipelineUnit`: what the call's Realtime session
asks of its unit on the event loop (``gateway.realtime.control.PipelineControl``): the call's
settings, reading ahead, responses (queued, or the preemptive reply adopted), input commit and
clear, the interruption. Every request checks the unit serves a call first (:meth:`_active_call`),
so a late request of an ended call never acts on the next caller.

The stage half (threads, the event sink, barge-in hooks, tracks) is ``gateway.pool.unit``, which
builds what this half uses (the attributes declared on :class:`UnitControl`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional

from gateway.media.playout import PlayoutBuffer
from gateway.media.thinking_cue import ThinkingCue
from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions, ModelSet
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.cancel import CancelScope
from gateway.pipeline.chain import StageChain
from gateway.pipeline.events import Interruption, PipelineEvent
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.messages import ClearInput, CommitInput, ResponseRequest
from gateway.pipeline.preemption import ReplyHold
from gateway.pool.call_state import CallState
from gateway.pool.lifecycle import UnitLifecycle, UnitState
from gateway.pool.preemptive import PreemptiveReplies, speaking
from gateway.pool.read_ahead import LatestPromptWarm, PromptReadAhead
from gateway.pool.thinking import arm_cue, prepare_filler


class UnitControl(UnitLifecycle):
    """The control methods of a unit (``PipelineControl``), on the event loop. ``PipelineUnit``
    sets every attribute declared here and gives :meth:`_deliver` and :meth:`run_in_thread`."""

    models: ModelSet
    call_state: CallState
    scope: CancelScope
    playout: PlayoutBuffer
    chain: StageChain
    cue: ThinkingCue
    instructions_read: LatestPromptWarm  # the call's instructions and tools, read ahead
    prompt_read: PromptReadAhead  # the prompt of a reply to the turn so far, read ahead
    preemptive: PreemptiveReplies  # the reply started at the caller's pause
    replying_elsewhere: Callable[[], int]  # how many other units write a reply now
    _latency: dict[int, TurnLatency]  # the current response's turn latency, by generation
    _uncut: Optional[int]  # the generation the caller's speech leaves alone (out of band)
    _quiet_turn: bool  # the current response was asked while no other unit replied

    @property
    def settings(self) -> CallSettings:
        """The call's settings (``StageContext.settings``): one frozen value, replaced whole by
        :meth:`apply_settings`, so a stage thread never sees half of an update."""
        return self.call_state.settings

    def _deliver(self, event: PipelineEvent) -> None:
        """Hand ``event`` to the call's sink (the unit's: ``PipelineUnit._deliver``)."""
        raise NotImplementedError

    def run_in_thread(self, work: Callable[[], None]) -> None:
        """Run ``work`` off the event loop (the unit's: ``PipelineUnit.run_in_thread``)."""
        raise NotImplementedError

    def _active_call(self) -> Optional[str]:
        """The call id while the unit serves a call; None while it drains, is stuck or idle, so
        that a late request of an ended call can never act on the unit (or the next caller)."""
        return self.call_id if self.state is UnitState.ACTIVE else None

    def current_settings(self) -> CallSettings:
        """The call's settings; right after the claim, the configured defaults."""
        return self.call_state.settings

    def apply_settings(self, settings: CallSettings) -> None:
        """The call's settings from now on (see ``PipelineControl.apply_settings``): swapped in at
        once, so the VAD thread reads the new ``turn`` from its next audio chunk and STT the new
        ``language``; a ``filler`` cue's audio is made now, and the shared LLM reads the prompt of
        the new instructions and tools ahead (an engine with a ``prepare`` method: llama.cpp;
        others ignore it). Ignored unless a call is served."""
        if self._active_call() is None:
            return
        self.call_state.settings = settings
        prepare_filler(self)
        prepare = getattr(self.models.llm, "prepare", None)
        if prepare is None:
            return
        options = GenerationOptions(tools=list(settings.tools), tool_choice=settings.tool_choice)
        # Off the event loop, the latest settings only (gateway.pool.read_ahead.LatestPromptWarm);
        # the earlier instructions' hold is let go of at once: they are no longer this call's.
        self.instructions_read.start(prepare, ([ChatMessage("system", settings.instructions)], options))

    def _let_go_of_warm(self) -> None:
        self.instructions_read.let_go()

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
        """See ``PipelineControl.read_ahead``: by an engine with a ``read_ahead`` method (llama.cpp,
        which schedules by deadline), the preemptive reply when ``reply`` and the call's
        ``preemptive_reply`` are on and it can start (``gateway.pool.preemptive``), else the prompt
        read ahead when ``llm_read_ahead`` is on; an earlier preemptive reply is discarded. Ignored
        unless a call is served."""
        read = getattr(self.models.llm, "read_ahead", None)
        call_id = self._active_call()
        if call_id is None or read is None:
            return
        self._discard_preemptive()  # a newer draft: the caller went on after the earlier pause
        request = self._request_key(messages, max_tokens, tools, tool_choice)
        if reply and self.settings.preemptive_reply:
            queue = getattr(self.models.llm, "queue", None)
            held = self.preemptive.begin(self.scope, self.playout, queue, request, self._speaking(audio))
            if held is not None:
                self._queue_reply(call_id, held.generation, request, audio, held.latency, held.hold)
                self.prompt_read.let_go()  # the reply reads its prompt itself
                return
        if self.config.llm_read_ahead:
            self.prompt_read.start(read, request)

    def _queue_reply(
        self,
        call_id: str,
        generation: int,
        request: tuple,
        audio: bool,
        latency: TurnLatency,
        hold: Optional[ReplyHold] = None,
    ) -> None:
        """Put the reply to ``request`` (a :meth:`_request_key`) on the LLM stage's queue."""
        messages, max_tokens, options = request
        self.chain.llm_in.put(
            ResponseRequest(
                call_id,
                generation=generation,
                messages=messages,
                max_tokens=max_tokens,
                audio=audio,
                settings=self.settings,
                latency=latency,
                options=options,
                hold=hold,
            )
        )

    def _hand_on_kept_events(self, generation: int) -> None:
        """The adopted reply's kept events, then its audio: released together, the pacer could
        send an audio delta before the transcript delta kept for it (seen in a fresh-clone run)."""
        for event in self.preemptive.release_events():
            self._deliver(event)
        self.playout.release(generation)

    def _discard_preemptive(self) -> None:
        """Discard the held preemptive reply, if any (``PreemptiveReplies.discard``). Any thread."""
        self.preemptive.discard(self.scope, self.playout)

    def _request_key(
        self, messages: list[ChatMessage], max_tokens: Optional[int], tools: Optional[list], tool_choice: str
    ) -> tuple[list[ChatMessage], int, GenerationOptions]:
        tokens = self.settings.max_tokens if max_tokens is None else max_tokens
        return list(messages), tokens, GenerationOptions(tools=list(tools or []), tool_choice=tool_choice)

    def _speaking(self, audio: bool) -> tuple[Any, ...]:
        """How a reply asked now speaks (``gateway.pool.preemptive.speaking``): a held reply is
        used only for a response that speaks as it does."""
        return speaking(audio, self.settings.voice, self.settings.speed)

    def keep_alive(self) -> None:
        """The call has work pending (an armed ``idle_timeout_ms``): restart its idle watchdog."""
        if self._active_call() is not None:
            self.call_state.touch()

    def commit_input(self) -> None:
        """Manual turn: end the caller's turn now."""
        call_id = self._active_call()
        if call_id is not None:
            self.chain.vad_in.put(CommitInput(call_id))

    def clear_input(self) -> None:
        """Drop the caller audio buffered so far."""
        call_id = self._active_call()
        if call_id is not None:
            self.chain.vad_in.put(ClearInput(call_id))

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
        """Queue a response to ``messages`` for the LLM (``audio`` False: text only; ``max_tokens``
        its own cap, None: the call's; ``tools``/``tool_choice`` what the model may call, as
        ``GenerationOptions`` takes them; ``turn_cuts`` False: the caller's speech neither cuts nor
        pauses it, an out-of-band response); returns its generation id (an earlier reply becomes stale).

        Raises RuntimeError when the unit is not serving a call (draining, stuck or idle)."""
        call_id = self._active_call()
        if call_id is None:
            raise RuntimeError(f"unit {self.index} is {self.state.value}: no response can start")
        request = self._request_key(messages, max_tokens, tools, tool_choice)
        now = time.monotonic()
        # The reply started at the pause, if it is this one; else one to other words is discarded.
        held = self.preemptive.adopt(self.scope, self.playout, request, self._speaking(audio), now)
        if held is None:
            self.prompt_read.keep_only_for(request)  # a read of another prompt would only compete
            generation, latency = self.scope.begin(), latency or TurnLatency()
            latency.mark("response_requested", now)
        else:
            self.prompt_read.let_go()
            generation, latency = held.generation, held.timed_with(latency, now)
        self._latency = {generation: latency}
        self._uncut = None if turn_cuts else generation
        self._quiet_turn = self.replying_elsewhere() == 0
        self.call_state.turned()
        arm_cue(self, audio, latency)
        if held is None:
            self._queue_reply(call_id, generation, request, audio, latency)
        else:  # its kept events follow the response's first ones (the caller's), then it plays
            self._loop.call_soon(self._hand_on_kept_events, generation)
        return generation

    def interrupt(self) -> Optional[Interruption]:
        """Cancel the response being generated or played and drop its unplayed audio at once.

        Returns None when nothing was going on (or the unit is not serving a call)."""
        if self._active_call() is None:
            return None
        self._discard_preemptive()  # a held reply was never heard: nothing to report of it
        generation = self.scope.current
        was_live = self.scope.live
        cleared = self.playout.clear()
        self.cue.stop()
        if not was_live and cleared is None:
            return None
        self.scope.cancel()
        if cleared is None:
            return Interruption(generation, audio_cleared=False)
        return Interruption(cleared[0], audio_cleared=True, played_ms=cleared[1], heard_text=cleared[2])
