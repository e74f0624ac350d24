"""The seam between a Realtime session and the pipeline serving its call.

RealtimeSession drives the pipeline only through :class:`PipelineControl`; ``gateway.pool.unit.PipelineUnit``
implements it, and ``gateway.pool.lease.UnitLease`` (what a session is given) implements it again
as a guard around the unit, as do the test doubles. The protocol layer imports nothing of the
pool: both sides meet on this Protocol and the pipeline's own types (CallSettings, Interruption,
TurnLatency).

Every method is called on the event loop and never blocks. Once the unit no longer serves the call
(draining, stuck, idle) each one does nothing, or, for :meth:`PipelineControl.create_response`, raises,
so that a late request of an ended call can never act on the unit or on its next caller.
"""

from __future__ import annotations

from typing import Optional, Protocol

from gateway.models.base import ChatMessage, FunctionTool
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.events import Interruption
from gateway.pipeline.latency import TurnLatency


class PipelineControl(Protocol):
    """What the protocol layer may ask of the pipeline serving its call."""

    def current_settings(self) -> CallSettings:
        """The call's settings now; the session reads them once, when it is created (right after
        the claim they are the configured defaults, ``CallSettings.defaults``)."""

    def apply_settings(self, settings: CallSettings) -> None:
        """The call's settings from now on, as one value (built from the session config and
        validated): at call start and after each ``session.update``. VAD follows ``turn`` and
        ``noise_reduction`` from its next audio chunk, STT ``language`` from its next turn, later
        responses the rest (see ``CallSettings``); the LLM may read the prompt of ``instructions``
        and ``tools`` into its cache now, before the caller's first question. Returns at once."""

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
        """A hint, at the caller's pause: the reply to the turn so far would be ``messages`` (with
        ``max_tokens``, ``tools``, ``tool_choice``, ``audio`` as :meth:`create_response` takes them);
        the LLM may read that prompt now, or start that reply held unheard (the preemptive reply),
        while the end of the turn is decided. ``reply`` False: the caller still speaks (a draft of
        the turn so far): the prompt may be read, no reply started. Used only if the response that follows asks for
        exactly this (the caller's words compared normalised); nothing is sent for it before that
        response's own events, nothing at all if it is not used. Returns at once."""

    def keep_alive(self) -> None:
        """The call has work pending (an armed ``idle_timeout_ms``): restart the call's own idle
        watchdog, which counts from the last activity."""

    def commit_input(self) -> None:
        """``input_audio_buffer.commit``: end the caller's turn now. The VAD stage answers with
        InputCommitted, or InputRejected when nothing is buffered."""

    def clear_input(self) -> None:
        """``input_audio_buffer.clear``: drop the caller audio not yet committed. No event follows."""

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
        """Start a reply to ``messages`` (the whole prompt); ``audio`` False for text only;
        ``max_tokens`` this response's own cap (None: the call's); ``tools`` the functions the model
        may call and ``tool_choice`` how ("auto", "none", "required" or a tool's name; see
        ``GenerationOptions``); ``turn_cuts`` False: the caller's speech never cuts it (an out-of-band
        response, ``conversation: "none"``: OpenAI's ``interrupt_response`` cuts only "any ongoing
        response with output to the default conversation"). Returns its generation id, which makes
        any earlier reply stale.
        Raises RuntimeError when the call is no longer served."""

    def interrupt(self) -> Optional[Interruption]:
        """Cancel the reply being generated or played and drop its unplayed audio at once; returns
        what the caller heard of it, or None when no reply was going on."""
