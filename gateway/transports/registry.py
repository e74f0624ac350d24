"""The live WebSocket sessions of this process, by session id: opening one (claiming a unit the
way a WebRTC call does, before the WebSocket upgrade, so that a full pool is an HTTP 503) and
ending every one at shutdown."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any, Optional

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.logging_setup import bind_call
from gateway.pipeline.events import PipelineEvent
from gateway.pool.end_reason import EndReason
from gateway.pool.pool import UnitPool
from gateway.realtime.audio_events import EventAudioSession
from gateway.realtime.limits import SessionLimits
from gateway.transports.sideband import SidebandHost, serve_sideband
from gateway.transports.websocket_session import WebSocketSession


def new_session_id(instance: str) -> str:
    """``ws_<instance>_<32 hex digits>``, shaped like a call id (``rtc_...``) so that logs and
    ``/v1/pool`` tell the transports apart."""
    return f"ws_{instance}_{secrets.token_hex(16)}"


class SessionRegistry:
    """The live WebSocket sessions, by session id (:func:`new_session_id`). ``local_models`` names
    the models really used (``{"llm", "stt", "voice"}``). As on the call registry, the hooks feed
    the metrics: ``on_event(event)`` sees every pipeline event of every session,
    ``on_server_event(event)`` every Realtime server event sent, ``on_session_start(session)`` and
    ``on_session_end(session)`` run once per session (``session.end_reason`` is set by then)."""

    def __init__(self, pool: UnitPool, config: GatewayConfig, local_models: dict[str, str]) -> None:
        self.pool = pool
        self.config = config
        self.sessions: dict[str, WebSocketSession] = {}
        self._local_models = local_models
        self.on_event: Callable[[PipelineEvent], None] = lambda event: None
        self.on_server_event: Callable[[dict[str, Any]], None] = lambda event: None
        self.on_session_start: Callable[[WebSocketSession], None] = lambda session: None
        self.on_session_end: Callable[[WebSocketSession], None] = lambda session: None
        self._sideband_stops: set[asyncio.Event] = set()

    def open(self, session_config: Optional[dict[str, Any]] = None, *, beta: bool = False) -> WebSocketSession:
        """Claim a unit and build the session; ``session_config`` (a validated Realtime session
        object: an ephemeral key's, the ``?model=`` of the URL) is applied before it starts, so
        ``session.created`` shows it. ``beta``: the client asked for the beta protocol.

        Synchronous, so nothing runs between the claim and the upgrade that follows. Raises
        PoolFullError when every unit is busy (nothing is claimed then).
        """
        session_id = new_session_id(self.config.instance)
        bind_call(session_id)  # log lines of this request and of the session's tasks carry it
        holder: dict[str, WebSocketSession] = {}

        def sink(event: PipelineEvent) -> None:
            self.on_event(event)
            session = holder.get("session")
            if session is not None:
                session.on_pipeline_event(event)

        def make_realtime(session: WebSocketSession) -> EventAudioSession:
            def send(event: dict[str, Any]) -> None:
                if session.socket is not None:  # (events before it are dropped: see send_event)
                    self.on_server_event(event)
                session.send_event(event)

            return EventAudioSession(
                session.unit,
                send,
                audio_input=session.audio_input,
                beta=beta,
                local_models=self._local_models,
                history_turns=self.config.history_turns,
                max_call_s=self.config.max_call_s,
                limits=SessionLimits.from_config(self.config),
            )

        unit = self.pool.claim(session_id, sink)  # raises PoolFullError
        session: Optional[WebSocketSession] = None
        try:
            session = WebSocketSession(session_id, unit, self.config, make_realtime, on_end=self._ended)
            if session_config:
                session.realtime.apply_session_update(session_config)
        except BaseException:
            if session is not None:
                session.pacer.stop()
            unit.begin_drain(EndReason.SERVER_ERROR)  # no session owns the unit yet: give it back
            raise
        holder["session"] = session
        self.sessions[session_id] = session
        self.on_session_start(session)
        return session

    def _ended(self, session: WebSocketSession) -> None:
        self.sessions.pop(session.id, None)
        self.on_session_end(session)

    async def serve_sideband(self, host: SidebandHost, ws: web.WebSocketResponse) -> None:
        """Run a sideband WebSocket (prepared) on the call ``host`` until either ends, or
        :meth:`close_all` (see ``gateway.transports.sideband``)."""
        stop = asyncio.Event()
        self._sideband_stops.add(stop)
        try:
            await serve_sideband(host, ws, stop)
        finally:
            self._sideband_stops.discard(stop)

    async def close_all(self) -> None:
        """End every session (``server_shutdown``, told to each client) and close every sideband
        (the calls go on until their own shutdown); errors are not raised."""
        for stop in list(self._sideband_stops):
            stop.set()
        message = "the gateway is shutting down"
        sessions = list(self.sessions.values())
        await asyncio.gather(
            *(session.hangup(EndReason.SERVER_SHUTDOWN, message) for session in sessions), return_exceptions=True
        )
