"""One call: an RTCPeerConnection bound to a claimed PipelineUnit, from SDP offer to hang-up."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Callable, Optional

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.rtcdatachannel import RTCDataChannel
from aiortc.sdp import SessionDescription

from gateway.config import GatewayConfig
from gateway.media.inbound import InboundAudioReader
from gateway.pool.pool import UnitPool
from gateway.pool.unit import PipelineUnit
from gateway.realtime.session import RealtimeSession

log = logging.getLogger(__name__)

EVENTS_CHANNEL = "oai-events"


class OfferError(ValueError):
    """The SDP offer cannot be used (HTTP 400); the message says why."""


def check_offer(sdp: str, max_bytes: int) -> SessionDescription:
    """Parse an SDP offer (RFC 8866) as aiortc will, before a unit is claimed for it.

    Raises OfferError if it is too large, does not parse, or offers neither audio nor a data channel.
    """
    if not sdp or not sdp.strip():
        raise OfferError("empty SDP offer")
    if len(sdp.encode()) > max_bytes:
        raise OfferError(f"SDP offer too large ({len(sdp.encode())} bytes, limit {max_bytes})")
    try:
        parsed = SessionDescription.parse(sdp)
    except Exception as exc:  # aiortc raises ValueError/IndexError/KeyError on malformed lines
        raise OfferError(f"malformed SDP offer: {type(exc).__name__}: {exc}") from None
    kinds = {media.kind for media in parsed.media}
    if not kinds & {"audio", "application"}:
        raise OfferError("the offer has no audio m-line and no data channel")
    return parsed


def ice_configuration(config: GatewayConfig) -> RTCConfiguration:
    urls = [u.strip() for u in config.ice_servers.split(",") if u.strip()]
    if not urls:
        return RTCConfiguration(iceServers=[])
    return RTCConfiguration(
        iceServers=[RTCIceServer(urls=urls, username=config.ice_username or None, credential=config.ice_credential or None)]
    )


class Call:
    """A caller's peer connection and everything bound to it for the length of the call.

    Created by :meth:`CallRegistry.create`; ends through :meth:`hangup` (client hang-up, peer
    connection closed or failed, data channel closed, a watchdog), which drains the unit.
    """

    def __init__(self, call_id: str, unit: PipelineUnit, config: GatewayConfig, realtime: RealtimeSession,
                 on_end: Callable[["Call"], None]) -> None:
        self.id = call_id
        self.unit = unit
        self.config = config
        self.realtime = realtime
        self.pc = RTCPeerConnection(ice_configuration(config))
        self.channel: Optional[RTCDataChannel] = None
        self.reader: Optional[InboundAudioReader] = None
        self.started_at = time.monotonic()
        self.end_reason: Optional[str] = None
        self._tasks: set[asyncio.Task] = set()
        self._on_end = on_end
        self._connected = asyncio.Event()

    # ----- set-up -----
    async def answer(self, offer_sdp: str) -> str:
        """Apply the offer, attach the unit's tracks, return the SDP answer (ICE candidates included)."""
        pc = self.pc

        @pc.on("track")
        def on_track(track):
            if track.kind == "audio" and self.reader is None:
                self.reader = InboundAudioReader(
                    track,
                    rate=self.unit.models.vad.sample_rate,
                    on_audio=self.unit.submit_audio,
                    on_timeout=lambda: self.hangup_soon("media_timeout", "no audio from the caller"),
                    media_timeout_s=self.config.media_timeout_s,
                )
                self._spawn(self.reader.run())

        @pc.on("datachannel")
        def on_datachannel(channel: RTCDataChannel):
            if channel.label != EVENTS_CHANNEL or self.channel is not None:
                return
            self.channel = channel

            @channel.on("message")
            def on_message(message):
                self.realtime.handle_client_message(message)

            @channel.on("close")
            def on_close():
                self.hangup_soon("data_channel_closed")

            self.realtime.start()

        @pc.on("connectionstatechange")
        async def on_state():
            state = pc.connectionState
            if state == "connected":
                self._connected.set()
            elif state in ("failed", "closed"):
                self.hangup_soon("ice_failed" if state == "failed" else "peer_closed")

        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        for transceiver in pc.getTransceivers():
            if transceiver.kind == "audio":
                # Answer audio with our track; aiortc negotiates Opus, PCMU or PCMA as offered.
                transceiver.direction = "sendrecv"
                transceiver.sender.replaceTrack(self.unit.new_output_track())
                break
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)
        self._spawn(self._watchdog())
        return pc.localDescription.sdp

    def send_event(self, event: dict) -> None:
        """Send a server event on ``oai-events`` if it is open (events before it opens are dropped)."""
        channel = self.channel
        if channel is not None and channel.readyState == "open":
            try:
                channel.send(json.dumps(event))
            except Exception:  # the transport went away mid-send: the call is ending
                log.debug("send on closed data channel dropped")

    # ----- watchdogs -----
    async def _watchdog(self) -> None:
        """Connect, idle and maximum-duration timeouts, checked every 100 ms or so."""
        cfg = self.config
        try:
            await asyncio.wait_for(self._connected.wait(), cfg.connect_timeout_s)
        except asyncio.TimeoutError:
            await self.hangup("connect_timeout", f"ICE/DTLS did not connect within {cfg.connect_timeout_s:g} s")
            return
        tick = min(0.5, max(0.05, min(cfg.idle_timeout_s, cfg.max_call_s) / 10))
        while self.end_reason is None:
            await asyncio.sleep(tick)
            now = time.monotonic()
            if now - self.started_at >= cfg.max_call_s:
                await self.hangup("max_duration", f"maximum call duration of {cfg.max_call_s:g} s reached")
                return
            session = self.unit.session
            idle_limit = cfg.idle_timeout_s  # (Realtime's idle_timeout_ms prompts the caller instead: realtime/)
            busy = self.unit.scope.live or self.unit.playout.buffered_ms > 0
            if busy:
                session.touch()
            elif now - session.last_activity >= idle_limit:
                await self.hangup("idle_timeout", f"no speech and no response for {idle_limit:g} s")
                return

    # ----- tear-down -----
    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def hangup_soon(self, reason: str, message: Optional[str] = None) -> None:
        if self.end_reason is None:
            asyncio.ensure_future(self.hangup(reason, message))

    async def hangup(self, reason: str, message: Optional[str] = None) -> None:
        """End the call once: tell the client why (unless it hung up itself), drain the unit, close."""
        if self.end_reason is not None:
            return
        self.end_reason = reason
        if reason in ("client_hangup", "peer_closed", "data_channel_closed"):
            self.realtime.close()  # the client left: nothing to tell it
        else:
            self.realtime.close(reason, message)
        if reason != "client_hangup":
            log.info("call %s ended: %s", self.id, reason)
        self.unit.begin_drain(reason)
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        # Let the close reason reach the client before the transport goes.
        if self.channel is not None and self.channel.readyState == "open" and reason not in ("client_hangup", "peer_closed"):
            await asyncio.sleep(0.05)
        await self.pc.close()
        self._on_end(self)


class CallRegistry:
    """The live calls of this process, by call id."""

    def __init__(self, pool: UnitPool, config: GatewayConfig, local_models: dict[str, str]) -> None:
        self.pool = pool
        self.config = config
        self.calls: dict[str, Call] = {}
        self._local_models = local_models
        self.on_call_end: Callable[[Call], None] = lambda call: None
        self.on_event: Callable[[object], None] = lambda event: None  # every pipeline event (metrics)

    async def create(self, offer_sdp: str, session: Optional[dict] = None) -> tuple[Call, str]:
        """Check the offer, claim a unit (PoolFullError if none), answer. Returns (call, answer SDP)."""
        check_offer(offer_sdp, self.config.max_offer_bytes)
        call_id = "rtc_" + uuid.uuid4().hex
        holder: dict[str, Call] = {}

        def sink(event):
            self.on_event(event)
            call = holder.get("call")
            if call is not None:
                call.realtime.on_pipeline_event(event)

        unit = self.pool.claim(call_id, sink)  # raises PoolFullError: no await between check and set
        realtime = RealtimeSession(
            unit,
            send=lambda event: holder["call"].send_event(event) if "call" in holder else None,
            local_models=self._local_models,
            history_turns=self.config.history_turns,
            max_call_s=self.config.max_call_s,
        )
        call = Call(call_id, unit, self.config, realtime, on_end=self._ended)
        holder["call"] = call
        self.calls[call_id] = call
        if session:
            realtime.handle_client_message(json.dumps({"type": "session.update", "session": session}))
        try:
            answer = await call.answer(offer_sdp)
        except Exception as exc:
            await call.hangup("invalid_offer")
            raise OfferError(f"cannot answer the offer: {exc}") from exc
        return call, answer

    def _ended(self, call: Call) -> None:
        self.calls.pop(call.id, None)
        self.on_call_end(call)

    async def hangup(self, call_id: str, reason: str = "client_hangup") -> bool:
        call = self.calls.get(call_id)
        if call is None:
            return False
        await call.hangup(reason)
        return True

    async def close_all(self) -> None:
        await asyncio.gather(*(call.hangup("server_shutdown", "the gateway is shutting down") for call in list(self.calls.values())),
                             return_exceptions=True)
