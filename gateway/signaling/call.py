"""One call: an RTCPeerConnection bound to a claimed PipelineUnit, from SDP offer to hang-up."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Callable, Optional

from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcdatachannel import RTCDataChannel
from aiortc.rtcicetransport import parse_stun_turn_uri
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
    except Exception as exc:  # aiortc raises ValueError/IndexError/KeyError/AssertionError on malformed lines
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise OfferError(f"malformed SDP offer ({detail}); expected an RFC 8866 offer as a WebRTC peer makes it") from None
    kinds = {media.kind for media in parsed.media}
    if not kinds & {"audio", "application"}:
        raise OfferError("the offer has no audio m-line and no data channel")
    for index, media in enumerate(parsed.media):
        _check_media(index, media)
    return parsed


# Audio codecs aiortc can answer with (its CODECS["audio"]).
_AUDIO_CODECS = {"opus", "g722", "pcmu", "pcma"}


def _check_media(index: int, media) -> None:
    """What aiortc needs of one m-line to answer it and connect (the checks of its
    ``setRemoteDescription`` and DTLS start), made before a unit is claimed so that a bad offer
    costs no unit. Raises OfferError naming the m-line."""
    where = f"m-line {index} ({media.kind})"
    if media.ice is None or not media.ice.usernameFragment or not media.ice.password:
        raise OfferError(f"{where}: ICE username fragment or password (a=ice-ufrag, a=ice-pwd) is missing")
    if media.dtls is None or not media.dtls.fingerprints:
        raise OfferError(f"{where}: DTLS fingerprint or setup role (a=fingerprint, a=setup) is missing")
    if media.kind in ("audio", "video") and not media.rtcp_mux:
        raise OfferError(f"{where}: RTCP multiplexing (a=rtcp-mux) is required")
    if media.kind == "audio":
        offered = [codec.mimeType.split("/", 1)[-1] for codec in media.rtp.codecs]
        if not any(name.lower() in _AUDIO_CODECS for name in offered):
            raise OfferError(f"{where}: no audio codec in common (offered {', '.join(offered) or 'none'}; "
                             "this gateway speaks Opus, G.722, PCMU and PCMA)")


_DIRECTIONS = ("a=sendrecv", "a=sendonly", "a=recvonly", "a=inactive")


def normalize_offer(sdp: str) -> str:
    """The offer with an explicit direction on every audio and video m-section that has none.

    RFC 8866 (6.7) makes a missing direction attribute mean the session-level one, else
    ``sendrecv``; SIP bridges rely on it (FreeSWITCH sends none), but aiortc cannot answer such a
    section (``ValueError: None is not in list``). An offer that names every direction is
    returned unchanged.
    """
    lines = sdp.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("m=")]
    if not starts:
        return sdp
    session_direction = next((line for line in lines[: starts[0]] if line.strip() in _DIRECTIONS), "a=sendrecv").strip()
    out = lines[: starts[0]]
    changed = False
    for begin, end in zip(starts, starts[1:] + [len(lines)]):
        section = lines[begin:end]
        out.append(section[0])
        if section[0].startswith(("m=audio ", "m=video ")) and not any(line.strip() in _DIRECTIONS for line in section):
            out.append(session_direction)
            changed = True
        out.extend(section[1:])
    return "\r\n".join(out) + "\r\n" if changed else sdp


def ice_configuration(config: GatewayConfig) -> RTCConfiguration:
    """The RTCPeerConnection's ICE servers from ``ice_servers`` (comma-separated STUN/TURN URLs)
    and the TURN ``ice_username`` / ``ice_credential``; none configured: host candidates only.

    Raises ValueError naming the URL that aiortc would reject (at the first call, after a unit
    was claimed) or ignore (a TURN server without credentials)."""
    urls = [u.strip() for u in config.ice_servers.split(",") if u.strip()]
    if not urls:
        return RTCConfiguration(iceServers=[])
    for url in urls:
        try:
            parsed = parse_stun_turn_uri(url)
        except ValueError as exc:
            raise ValueError(f"ice_servers: {url!r} is not a STUN/TURN URL ({exc}), "
                             "e.g. stun:stun.example.org:3478 or turn:turn.example.org:3478?transport=tcp") from None
        if parsed["scheme"] in ("turn", "turns") and not (config.ice_username and config.ice_credential):
            raise ValueError(f"ice_servers: {url!r} is a TURN server: set ice_username and ice_credential too")
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
        self._hangup_task: Optional[asyncio.Future] = None
        self._output_track: Optional[MediaStreamTrack] = None  # reads the unit's playout buffer

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
                # Once the call is ending its unit may already serve the next caller: a late
                # message must not reach it (it would act on that caller's session).
                if self.end_reason is None:
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
        answered_audio = False
        for transceiver in pc.getTransceivers():
            if transceiver.kind == "audio" and not answered_audio:
                # Answer audio with our track; aiortc negotiates Opus, PCMU or PCMA as offered.
                transceiver.direction = "sendrecv"
                self._output_track = self.unit.new_output_track()
                transceiver.sender.replaceTrack(self._output_track)
                answered_audio = True
            else:
                # Video, or a second audio m-line: answered inactive. Accepted (aiortc's default,
                # recvonly) it would be received and decoded into a queue nobody reads.
                transceiver.direction = "inactive"
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)
        if not any(t.kind == "audio" and t.currentDirection in ("sendrecv", "sendonly") for t in pc.getTransceivers()):
            # No audio goes back to this caller (data-channel-only, or audio offered sendonly or
            # inactive); reply audio must still leave the playout buffer, or TTS blocks on it.
            self._output_track = self.unit.new_output_track()
            self._spawn(self._play_to_nowhere(self._output_track))
        self._spawn(self._watchdog())
        return pc.localDescription.sdp

    @staticmethod
    async def _play_to_nowhere(track: MediaStreamTrack) -> None:
        """Pull ``track`` (20 ms frames, paced on the wall clock) and drop the frames, as a sender
        would send them: responses play out in real time, so their ``output_audio_buffer`` events,
        ``response.done`` and the watchdogs work as on a call with audio. Ends when cancelled."""
        try:
            while True:
                await track.recv()
        except MediaStreamError:
            return
        finally:
            track.stop()

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
        """:meth:`hangup` from a synchronous callback (aiortc and media events): scheduled on the
        event loop, at most once."""
        if self.end_reason is None and self._hangup_task is None:
            self._hangup_task = asyncio.ensure_future(self.hangup(reason, message))  # held: not GC'd mid-run

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
        if self._output_track is not None:
            # The drain can end, and the unit serve the next caller, before pc.close() below has
            # stopped the sender: this call's track must not read the next caller's reply audio.
            self._output_track.stop()
        self.unit.begin_drain(reason)
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        # Let the close reason reach the client before the transport goes.
        try:
            if self.channel is not None and self.channel.readyState == "open" and reason not in ("client_hangup", "peer_closed"):
                await asyncio.sleep(0.05)
            await self.pc.close()
        finally:
            self._on_end(self)  # even if closing failed: the registry must not keep a dead call


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
        offer_sdp = normalize_offer(offer_sdp)
        call_id = "rtc_" + uuid.uuid4().hex
        holder: dict[str, Call] = {}

        def sink(event):
            self.on_event(event)
            call = holder.get("call")
            if call is not None:
                call.realtime.on_pipeline_event(event)

        unit = self.pool.claim(call_id, sink)  # raises PoolFullError: no await between check and set
        try:
            realtime = RealtimeSession(
                unit,
                send=lambda event: holder["call"].send_event(event) if "call" in holder else None,
                local_models=self._local_models,
                history_turns=self.config.history_turns,
                max_call_s=self.config.max_call_s,
            )
            call = Call(call_id, unit, self.config, realtime, on_end=self._ended)
        except BaseException:
            unit.begin_drain("server_error")  # no call owns the unit yet: give it back
            raise
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
        """End the call ``call_id``; False if there is no such call (unknown or already ended)."""
        call = self.calls.get(call_id)
        if call is None:
            return False
        await call.hangup(reason)
        return True

    async def close_all(self) -> None:
        """End every call (``server_shutdown``, told to each client); errors are not raised."""
        await asyncio.gather(*(call.hangup("server_shutdown", "the gateway is shutting down") for call in list(self.calls.values())),
                             return_exceptions=True)
