"""The stage thread: take a message, check it belongs to the current call, process it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional, Protocol

from gateway.logging_setup import bind_call
from gateway.pipeline.events import PipelineEvent, SpeechStarted, StageFailed
from gateway.pipeline.messages import CallEnd, Message
from gateway.pipeline.queues import StageQueue

if TYPE_CHECKING:
    import numpy as np

    from gateway.media.playout import PlayoutBuffer
    from gateway.models.base import ScoredTranscript
    from gateway.pipeline.call_settings import CallSettings

log = logging.getLogger(__name__)


class StageContext(Protocol):
    """What a stage may use of its unit (implemented by ``gateway.pool.unit.PipelineUnit``)."""

    call_id: Optional[str]
    playout: PlayoutBuffer  # where the TTS stage writes reply audio

    @property
    def settings(self) -> CallSettings:
        """The call's settings now (a frozen value, replaced whole by a ``session.update``): the
        VAD stage reads ``turn`` and ``noise_reduction`` per audio message, STT ``language`` per turn."""

    def is_current(self, generation: int) -> bool:
        """True while ``generation`` is the unit's live (not cancelled) response."""

    def notify(self, event: PipelineEvent) -> None:
        """Report an event to the unit's owner (the call's Realtime session); thread-safe."""

    def on_speech_started(self, event: SpeechStarted) -> None:
        """Caller speech confirmed: barge in if a reply is going, then report ``event``."""

    def pause_reply(self) -> bool:
        """Hold the reply's audio where it is (barge-in being decided); False when none plays."""

    def resume_reply(self) -> None:
        """Play the held reply on."""

    def barge_in_heard(self, call_id: str, speculation: int, heard: ScoredTranscript) -> None:
        """STT: what barge-in probe ``speculation`` heard, for the VAD stage; thread-safe."""

    def echo_share(self, audio: np.ndarray, end_time: float) -> float:
        """0..1: how much of ``audio`` (float32 16 kHz, last sample heard at ``end_time``,
        monotonic s) is the reply's own echo (``gateway.media.echo_reference``)."""

    def reply_words_since(self, since: float) -> list[str]:
        """The words of the reply audio that began to play since ``since`` (monotonic s), in
        order: what the caller's microphone may pick up as the assistant's echo
        (``PlayoutBuffer.words_played_since``)."""


class Stage:
    """Base of the four stage threads.

    Subclasses implement :meth:`handle` for their messages and :meth:`reset` for per-call state.
    The loop forwards a CallEnd marker after ``reset``; the last stage hands it to ``on_marker_out``.
    A handler that raises reports :class:`StageFailed` for that call and the loop goes on.
    """

    name = "stage"

    def __init__(self, ctx: StageContext, inbox: StageQueue, outbox: Optional[StageQueue]) -> None:
        self.ctx = ctx
        self.inbox = inbox
        self.outbox = outbox
        self.on_marker_out: Callable[[CallEnd], None] = lambda marker: None
        self.retired = threading.Event()  # set when the unit replaced this thread (stuck recovery)
        self._thread: Optional[threading.Thread] = None

    def start(self, label: str) -> None:
        """Start the loop on a daemon thread named ``{label}-{name}`` (e.g. ``unit0-vad``), so logs and
        thread dumps tell the units' stages apart."""
        self._thread = threading.Thread(target=self._run, name=f"{label}-{self.name}", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (after ``retired`` was set); True if it did."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.alive

    @property
    def alive(self) -> bool:
        """True while the thread runs. A retired thread ends once its current message is done (never,
        if stuck in a model call), or within about 0.5 s if it was waiting on an empty queue."""
        return self._thread is not None and self._thread.is_alive()

    def emit(self, message: Message) -> None:
        """Pass a message on to the next stage (dropped if this stage has been retired)."""
        if self.outbox is not None and not self.retired.is_set():
            self.outbox.put(message)

    def _run(self) -> None:
        while not self.retired.is_set():
            message = self.inbox.get(timeout=0.5)
            if message is None or self.retired.is_set():
                continue
            if isinstance(message, CallEnd):
                self._reset_safely()
                if self.outbox is not None:
                    self.emit(message)
                else:
                    self.on_marker_out(message)
                continue
            if message.call_id != self.ctx.call_id:
                continue  # left over from an earlier call
            bind_call(message.call_id)  # this thread's log lines name the call it works for
            try:
                self.handle(message)
            except Exception as exc:  # one call's bad input must not kill the stage
                log.exception("%s failed on %s", self.name, type(message).__name__)
                self.ctx.notify(
                    StageFailed(
                        message.call_id,
                        stage=self.name,
                        message=f"{type(exc).__name__}: {exc}",
                        generation=getattr(message, "generation", None),
                    )
                )

    def _reset_safely(self) -> None:
        try:
            self.reset()
        except Exception:
            log.exception("%s reset failed", self.name)

    def handle(self, message: Message) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset(self) -> None:
        """Forget everything about the call that just ended."""
