"""The one door every transport opens a Realtime session through, and the live sessions of this
process: :class:`Door` (admission, ``Door.open``, the registry).

A transport (the WebRTC call, ``gateway.transports.webrtc``; the WebSocket session,
``gateway.transports.websocket``; the SIP leg, ``gateway.transports.sip``) carries events and audio
for one caller (:class:`~gateway.transports.transport.Transport`). Everything else is the door's,
and so the same for every transport:

- **admission**: a call is refused while the gateway drains (``draining()``, the graceful shutdown
  of the server) or when no unit is idle or the compute admits no more talkers
  (:meth:`UnitPool.refusal <gateway.pool.pool.UnitPool.refusal>`): one :class:`Refused` (code
  ``server_shutdown``, ``pool_full``, ``compute_busy``), which each edge answers in its protocol
  (HTTP 503 + ``Retry-After``, SIP 503 + ``Retry-After``); and a source (the client's address,
  ``gateway.transports.sources``) that already holds ``max_sessions_per_source`` live sessions is
  refused ``too_many_sessions`` (HTTP 429), unless it is one of ``unlimited_sources``. Every call
  admitted (``answered``) or refused for want of room (``pool_full``, ``compute_busy``,
  ``too_many_sessions``) is told to ``on_admission(result)``:
  the ``vg_calls_total{result}`` counter, for every transport. An edge that must check who calls
  first (HTTP: the key, so that a stranger learns nothing of the load) calls
  :meth:`Door.refuse_if_busy` after that check, before reading the offer;
- :meth:`Door.open` mints the session id (``rtc_`` / ``ws_`` / ``sip_`` + instance + 128 random
  bits), claims a pool unit (a :class:`~gateway.pool.lease.UnitLease`), builds the Realtime session
  (with the audio-in-events variant when the transport carries audio in its events), wires the
  unit's pipeline events in and the server events out, and applies the session config parsed at
  the edge (:class:`~gateway.realtime.session_update.SessionUpdate`); the session then runs as a
  :class:`~gateway.transports.live_session.LiveSession` (rate limit, DTMF, watchdogs, the one
  hang-up sequence, the recording);
- the registry (:attr:`Door.sessions`: hang-up by id, sidebands, the graceful drain, shutdown).

A new transport implements ``Transport`` (five members), adds a :class:`TransportKind` line and
opens its sessions with ``door.open(TransportKind.X, update, connect=lambda session: MyLeg(session, ...))``;
see CONTRIBUTING.md, "Where a transport goes".
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from collections.abc import Callable
from typing import Any, Optional

from gateway.config import GatewayConfig
from gateway.logging_setup import bind_call
from gateway.pipeline import events as pe
from gateway.pool.end_reason import EndReason
from gateway.pool.pool import PoolFullError, UnitPool
from gateway.realtime.audio_events import AudioInput, EventAudioSession
from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits
from gateway.realtime.session import RealtimeSession
from gateway.realtime.session_update import SessionUpdate
from gateway.transports.call_record import RecordPolicy
from gateway.transports.live_session import LiveSession
from gateway.transports.record_usage import RecordUsage
from gateway.transports.sources import SourceLimits, source_key
from gateway.transports.transport import ServerEvent, Transport, TransportKind

log = logging.getLogger(__name__)

ANSWERED = "answered"  # the ``result`` of an admitted call (``on_admission``)
SERVER_SHUTDOWN = "server_shutdown"
TOO_MANY_SESSIONS = "too_many_sessions"  # the source holds max_sessions_per_source live sessions


class Refused(Exception):
    """A call the door does not open now: ``code`` (``server_shutdown``: the gateway is draining;
    ``pool_full``: no unit is idle; ``compute_busy``: units are, but the compute admits no more
    talkers; ``too_many_sessions``: the caller's source holds as many live sessions as one may),
    ``message`` (a sentence for the caller, the retry included) and ``retry_after_s``
    (when to try again; another instance may take the call meanwhile)."""

    def __init__(self, code: str, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_s = retry_after_s


def new_session_id(kind: TransportKind, instance: str) -> str:
    """``<prefix>_<instance>_<32 hex digits>``: the transport, the instance that owns the session
    (``config.instance``, what a proxy routes the session's later requests by) and 128 random bits
    (the id is a hang-up capability: unguessable)."""
    return f"{kind.id_prefix}_{instance}_{secrets.token_hex(16)}"


class Door:
    """The live sessions of this process, by session id, for every transport, and who may open one.

    ``local_models`` names the models really used (``{"llm", "stt", "voice"}``), for the Realtime
    sessions to report; ``draining()`` is True once the gateway stops admitting (the server's
    graceful shutdown). Hooks (metrics): ``on_admission(result)`` once per call admitted
    (``answered``) or refused for want of room (``pool_full``, ``compute_busy``; a refusal while
    draining is not counted), ``on_event(event)`` sees every pipeline event of every session,
    ``on_server_event(event)`` every server event sent to a client, ``on_start(session)`` runs once
    per opened session, ``on_end(session)`` once per session after it ended (``session.end_reason``
    set); ``session.kind`` labels them.
    """

    def __init__(
        self,
        pool: UnitPool,
        config: GatewayConfig,
        local_models: dict[str, str],
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self.pool = pool
        self.config = config
        self.limits = SessionLimits.from_config(config)
        self.source_limits = SourceLimits.from_config(config)  # raises ValueError for a bad network list
        self.sessions: dict[str, LiveSession] = {}
        self._sources: dict[str, str] = {}  # session id -> its source's key, for the limited sources
        self._local_models = local_models
        self._draining = draining
        self.on_admission: Callable[[str], None] = lambda result: None
        self.on_event: Callable[[pe.PipelineEvent], None] = lambda event: None
        self.on_server_event: Callable[[ServerEvent], None] = lambda event: None
        self.on_start: Callable[[LiveSession], None] = lambda session: None
        self.on_end: Callable[[LiveSession], None] = lambda session: None
        self._closing_sidebands: set[asyncio.Event] = set()
        # What the recordings take (measured at start by the app, off the event loop): the disk bound's measure.
        self.record_usage = RecordUsage(RecordPolicy.from_config(config))

    # ----- admission -----
    def refuse_if_draining(self) -> None:
        """Raises Refused ``server_shutdown`` once the gateway drains (not counted: the caller
        should try another instance). Call it before a key is used up or a unit claimed."""
        if self._draining():
            retry = self.config.retry_after_s
            message = f"The gateway is shutting down; retry in {retry} s (another instance may take the call)."
            raise Refused(SERVER_SHUTDOWN, message, retry)

    def refuse_if_busy(self) -> None:
        """Raises Refused ``pool_full`` or ``compute_busy`` (counted) when a call would not get a
        unit now: a new call is refused at once, before its offer is read, so that behind a proxy
        it goes to the next process. :meth:`open` checks the same again at the claim."""
        refused = self.pool.refusal()
        if refused is not None:
            raise self._refused(refused)

    def refuse_if_source_full(self, source: Optional[str]) -> None:
        """Raises Refused ``too_many_sessions`` (counted) when ``source`` (the client's address;
        None: not limited, as a SIP trunk's) already holds ``max_sessions_per_source`` live sessions
        and is none of ``unlimited_sources``. :meth:`open` checks the same again."""
        limit = self.source_limits.max_sessions
        if not limit or not self.source_limits.limited(source):
            return
        assert source is not None
        key = source_key(source)
        live = sum(1 for held in self._sources.values() if held == key)
        if live >= limit:
            self.on_admission(TOO_MANY_SESSIONS)
            retry = self.config.retry_after_s
            message = (
                f"Too many sessions from one address: {key} holds {live} live sessions, the most one source may "
                f"hold (max_sessions_per_source {limit}); retry in {retry} s, once one has ended."
            )
            raise Refused(TOO_MANY_SESSIONS, message, retry)

    def _refused(self, busy: PoolFullError) -> Refused:
        """The Refused of a claim refused by the pool (its ``code``: ``pool_full``,
        ``compute_busy``), counted."""
        self.on_admission(busy.code)
        retry = self.config.retry_after_s
        if busy.retry_after_s is not None:  # compute_busy: when the measured load is expected to clear
            retry = max(retry, math.ceil(busy.retry_after_s))
        return Refused(busy.code, f"{busy}; retry in {retry} s.", retry)

    # ----- opening -----
    def open(
        self,
        kind: TransportKind,
        update: Optional[SessionUpdate],
        connect: Callable[[LiveSession], Transport],
        *,
        beta: bool = False,
        extensions: frozenset[str] = frozenset(),
        source: Optional[str] = None,
    ) -> LiveSession:
        """Open a session: mint its id, claim a unit, build the transport with
        ``connect(session)`` (it may keep ``session``, but must not send yet), build the Realtime
        session (``beta``: the client asked for the beta protocol; ``extensions``: the gateway
        events it asked for), apply ``update`` (None: the configured defaults) and register it.
        ``source``: the client's address, held to ``max_sessions_per_source`` (None: not limited).

        Synchronous: nothing runs between the claim and what the caller does next (a WebSocket
        upgrade, an SDP answer). Raises Refused (:meth:`refuse_if_draining`,
        :meth:`refuse_if_source_full`, then the claim: see :meth:`refuse_if_busy`), ClientError when
        ``update`` cannot apply, or whatever ``connect`` raises; no unit stays claimed then. An
        opened session is counted ``answered``.
        """
        self.refuse_if_draining()
        self.refuse_if_source_full(source)
        session_id = new_session_id(kind, self.config.instance)
        bind_call(session_id)  # log lines of this request and of the session's tasks carry it
        holder: list[LiveSession] = []

        def sink(event: pe.PipelineEvent) -> None:
            self.on_event(event)
            if holder:
                holder[0].pipeline_event(event)

        try:
            lease = self.pool.claim(session_id, sink)
        except PoolFullError as busy:  # or ComputeBusyError: its code says which
            raise self._refused(busy) from None
        session = LiveSession(kind, session_id, lease, self.config, self.record_usage)
        self.record_usage.measure_soon()  # fresh for a recording the session may ask for
        transport: Optional[Transport] = None
        try:
            transport = connect(session)
            session.realtime = self._realtime(session, transport.audio_input, beta, extensions)
            if session.record_policy.all_calls:
                self._record_all(session)
            if update is not None:
                session.realtime.apply_update(update)
        except BaseException:
            if transport is not None:
                transport.stop_audio()
            lease.release(EndReason.SERVER_ERROR)  # no session owns the unit yet: give it back
            if session.record is not None:
                session.record.discard()
            raise
        session.transport = transport
        session.on_server_event = self.on_server_event
        session.on_end = self._ended
        holder.append(session)
        self.sessions[session_id] = session
        if self.source_limits.limited(source):
            assert source is not None
            self._sources[session_id] = source_key(source)
        self.on_admission(ANSWERED)
        self.on_start(session)
        return session

    @staticmethod
    def _record_all(session: LiveSession) -> None:
        try:
            session.set_recording(True)
        except ClientError:
            pass  # logged; the call goes on unrecorded

    def _realtime(
        self, session: LiveSession, audio_input: Optional[AudioInput], beta: bool, extensions: frozenset[str]
    ) -> RealtimeSession:
        common: dict[str, Any] = {
            "local_models": self._local_models,
            "history_turns": self.config.history_turns,
            "max_call_s": self.config.max_call_s,
            "limits": self.limits,
            "extensions": extensions,
            "recording": session.set_recording if session.record_policy.directory is not None else None,
        }
        if audio_input is not None:
            return EventAudioSession(session.lease, session.send, audio_input=audio_input, beta=beta, **common)
        return RealtimeSession(session.lease, session.send, **common)

    def _ended(self, session: LiveSession) -> None:
        self.sessions.pop(session.id, None)
        self._sources.pop(session.id, None)
        self.on_end(session)

    def live(self, session_id: str) -> Optional[LiveSession]:
        """The session ``session_id`` while it is live, else None."""
        session = self.sessions.get(session_id)
        return session if session is not None and session.end_reason is None else None

    async def hangup(self, session_id: str, reason: EndReason = EndReason.CLIENT_HANGUP) -> bool:
        """End the session ``session_id``; False if there is no such session (unknown, ended, or
        already ending: of several hang-ups at once, as of several one after the other, one is True)."""
        session = self.live(session_id)
        if session is None:
            return False
        await session.hangup(reason)
        return True

    def closing_signal(self) -> asyncio.Event:
        """An event set by :meth:`close_all` (a sideband waits on it, to close at shutdown);
        give it back with :meth:`forget_signal`."""
        signal = asyncio.Event()
        self._closing_sidebands.add(signal)
        return signal

    def forget_signal(self, signal: asyncio.Event) -> None:
        """The sideband that held ``signal`` is closed."""
        self._closing_sidebands.discard(signal)

    async def close_all(self) -> None:
        """Close every sideband and end every session (``server_shutdown``, told to each client);
        errors are not raised."""
        for signal in list(self._closing_sidebands):
            signal.set()
        message = "the gateway is shutting down"
        sessions = list(self.sessions.values())
        await asyncio.gather(
            *(session.hangup(EndReason.SERVER_SHUTDOWN, message) for session in sessions), return_exceptions=True
        )
        await self.record_usage.close()
