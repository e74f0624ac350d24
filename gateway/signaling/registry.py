"""The live calls of this process, by call id: opening a call for an SDP offer (OpenAI Realtime
WebRTC contract: ``POST /v1/realtime/calls`` answers with the call id in ``Location``), hanging
it up, and ending every call at shutdown."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.logging_setup import bind_call
from gateway.pipeline.events import PipelineEvent
from gateway.pool.pool import UnitPool
from gateway.realtime.limits import SessionLimits
from gateway.realtime.session import RealtimeSession
from gateway.signaling.call import Call
from gateway.signaling.end_reason import EndReason
from gateway.signaling.offer import OfferError, answer_failure, check_offer

log = logging.getLogger(__name__)


def new_call_id(instance: str) -> str:
    """``rtc_<instance>_<32 hex digits>``: the instance that owns the call (``config.instance``,
    what a proxy routes the call's later requests by) and 128 random bits (the id is a hang-up
    capability: unguessable)."""
    return f"rtc_{instance}_{secrets.token_hex(16)}"


class CallRegistry:
    """The live calls of this process, by call id (:func:`new_call_id`).

    ``local_models`` names the models really used (``{"llm", "stt", "voice"}``), for the Realtime
    sessions to report. ``on_event(event)`` sees every pipeline event of every call (metrics);
    ``on_server_event(event)`` every Realtime server event sent to a client; ``on_call_start(call)``
    runs once per registered call, ``on_call_end(call)`` once per call after it ended
    (``call.end_reason`` is set).
    """

    def __init__(self, pool: UnitPool, config: GatewayConfig, local_models: dict[str, str]) -> None:
        self.pool = pool
        self.config = config
        self.calls: dict[str, Call] = {}
        self._local_models = local_models
        self.on_call_start: Callable[[Call], None] = lambda call: None
        self.on_call_end: Callable[[Call], None] = lambda call: None
        self.on_event: Callable[[PipelineEvent], None] = lambda event: None
        self.on_server_event: Callable[[dict[str, Any]], None] = lambda event: None

    async def create(self, offer_sdp: str, session_config: Optional[dict[str, Any]] = None) -> tuple[Call, str]:
        """Check the SDP offer, claim a unit, apply ``session_config`` (a validated Realtime
        session object, as a ``session.update`` carries it) and answer. Returns (call, SDP answer).

        Raises OfferError (no unit claimed for an unusable offer; a claimed one is drained when
        aiortc refuses the offer) and PoolFullError when every unit is busy; any other exception
        of answering is re-raised after the call is hung up (the HTTP layer's 500, logged).
        """
        offer = check_offer(offer_sdp, self.config.max_offer_bytes)
        call_id = new_call_id(self.config.instance)
        bind_call(call_id)  # log lines of this request and of the call's tasks carry it
        holder: dict[str, Call] = {}

        def sink(event: PipelineEvent) -> None:
            self.on_event(event)
            call = holder.get("call")
            if call is not None:
                call.realtime.on_pipeline_event(event)

        def send(event: dict[str, Any]) -> None:
            call = holder.get("call")
            if call is not None:
                self.on_server_event(event)
                call.send_event(event)

        unit = self.pool.claim(call_id, sink)  # raises PoolFullError: no await between check and set
        try:
            realtime = RealtimeSession(
                unit,
                send=send,
                local_models=self._local_models,
                history_turns=self.config.history_turns,
                max_call_s=self.config.max_call_s,
                limits=SessionLimits.from_config(self.config),
            )
            call = Call(call_id, unit, self.config, realtime, on_end=self._ended)
        except BaseException:
            unit.begin_drain(EndReason.SERVER_ERROR)  # no call owns the unit yet: give it back
            raise
        holder["call"] = call
        self.calls[call_id] = call
        self.on_call_start(call)
        if session_config:
            try:
                realtime.apply_session_update(session_config)
            except BaseException:  # validated by the caller: a fault here is the server's
                await call.hangup(EndReason.SERVER_ERROR)
                raise
        try:
            answer = await call.answer(offer)
        except Exception as exc:
            refusal = answer_failure(exc)
            if refusal is None:  # not an offer aiortc refused: a fault here (500, logged with its traceback)
                await call.hangup(EndReason.SERVER_ERROR)
                raise
            await call.hangup(EndReason.INVALID_OFFER)
            log.info("offer not answered: %s: %s", type(exc).__name__, exc)
            raise OfferError(refusal) from exc
        return call, answer

    def _ended(self, call: Call) -> None:
        self.calls.pop(call.id, None)
        self.on_call_end(call)

    async def hangup(self, call_id: str, reason: EndReason = EndReason.CLIENT_HANGUP) -> bool:
        """End the call ``call_id``; False if there is no such call (unknown or already ended)."""
        call = self.calls.get(call_id)
        if call is None:
            return False
        await call.hangup(reason)
        return True

    async def close_all(self) -> None:
        """End every call (``server_shutdown``, told to each client); errors are not raised."""
        message = "the gateway is shutting down"
        calls = list(self.calls.values())
        await asyncio.gather(
            *(call.hangup(EndReason.SERVER_SHUTDOWN, message) for call in calls), return_exceptions=True
        )
