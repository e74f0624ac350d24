"""A WebRTC Realtime client built on aiortc: speaks prepared audio, records what it hears.

Used by the tests and benchmarks, and a small reference for bridges that talk to the gateway: it
does what a browser does (audio track + ``oai-events`` data channel + SDP offer over HTTP).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Optional

import aiohttp
import numpy as np
from aiortc import RTCConfiguration, RTCDataChannel, RTCPeerConnection, RTCRtpReceiver, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame

from gateway.media.outbound import FRAME_SAMPLES, PacedAudioTrack
from gateway.media.playout import SAMPLE_RATE
from gateway.media.resample import Resampler

RATE = SAMPLE_RATE
FRAME = FRAME_SAMPLES  # 20 ms at 48 kHz


class MicrophoneTrack(PacedAudioTrack):
    """A paced 48 kHz mono track: plays queued int16 audio, silence in between (like a live mic).

    ``say(samples)`` queues int16 48 kHz mono samples; ``speaking`` is True while any are left.
    """

    def __init__(self) -> None:
        super().__init__()
        self._queue = np.zeros(0, np.int16)
        self.finished_at: Optional[float] = None  # monotonic time the last queued sample was sent

    def say(self, samples: np.ndarray) -> None:
        """Queue int16 48 kHz mono ``samples`` after any still unsent; they leave 960 samples (20 ms)
        a frame. ``finished_at`` goes back to None until the last of them is sent."""
        self._queue = np.concatenate([self._queue, samples.astype(np.int16)])
        self.finished_at = None

    @property
    def speaking(self) -> bool:
        """True while queued samples are unsent; False once the track is back to sending silence."""
        return self._queue.size > 0

    def next_samples(self) -> np.ndarray:
        chunk, self._queue = self._queue[:FRAME], self._queue[FRAME:]
        if chunk.size and not self._queue.size:
            self.finished_at = time.monotonic()
        if chunk.size < FRAME:
            chunk = np.concatenate([chunk, np.zeros(FRAME - chunk.size, np.int16)])
        return chunk


@dataclass
class ReceivedAudio:
    """Audio the client heard: int16 mono 48 kHz, and the arrival time of each 20 ms frame."""

    frames: list[np.ndarray] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)

    def samples(self, since: float = 0.0) -> np.ndarray:
        """int16 48 kHz mono, shape (n,): the frames that arrived at or after ``since``
        (time.monotonic() seconds), joined; empty if none did."""
        picked = [f for f, t in zip(self.frames, self.arrivals, strict=False) if t >= since]
        return np.concatenate(picked) if picked else np.zeros(0, np.int16)

    def voiced_times(self, level: int = 300) -> list[float]:
        """Arrival times of frames whose peak exceeds ``level`` (not silence)."""
        return [t for f, t in zip(self.frames, self.arrivals, strict=False) if f.size and int(np.abs(f).max()) > level]


def _drop_receive_prefetch(receiver: RTCRtpReceiver) -> None:
    """aiortc's audio receiver holds 4 frames (80 ms) before it plays any; on loopback there is no
    jitter to absorb. aiortc has no setting for it, so its private buffer is replaced (if present)."""
    from aiortc.jitterbuffer import JitterBuffer

    name = "_RTCRtpReceiver__jitter_buffer"
    if hasattr(receiver, name):
        setattr(receiver, name, JitterBuffer(capacity=16, prefetch=0))


class RealtimeClient:
    """One call to a gateway at ``base_url`` (e.g. ``http://127.0.0.1:8080``)."""

    def __init__(
        self,
        base_url: str,
        codec: Optional[str] = None,
        low_latency: bool = True,
        configuration: Optional[RTCConfiguration] = None,
        gateway_events: tuple[str, ...] = ("gateway.latency", "gateway.barge_in"),
    ) -> None:
        """``configuration``: the peer connection's ICE servers and policy (e.g. a TURN server with
        ``iceTransportPolicy`` RELAY: relay candidates only); None: aiortc's default.
        ``gateway_events``: the gateway's own server events to ask for (``?gateway_events=``; this
        client reads ``gateway.latency`` and ``gateway.barge_in``); () for only OpenAI's events, as
        a stock client gets."""
        self.base_url = base_url.rstrip("/")
        self.gateway_events = gateway_events
        # True: hear each frame as it arrives (no 80 ms receive prefetch), so that timings measure
        # the gateway rather than this client's jitter buffer.
        self.low_latency = low_latency
        self.codec = codec  # e.g. "PCMU" to act like a SIP bridge; None = Opus
        self.pc = RTCPeerConnection(configuration)
        self.mic = MicrophoneTrack()
        self.heard = ReceivedAudio()
        self.events: list[dict] = []
        self.event_times: list[float] = []
        self.call_id: Optional[str] = None
        self._hangup_headers: dict[str, str] = {}
        self.channel: Optional[RTCDataChannel] = None
        self._new_event = asyncio.Condition()
        self._reader: Optional[asyncio.Task] = None
        self._recording: set[asyncio.Task] = set()  # events being recorded (held until done)
        self.status: Optional[int] = None
        self.error_body: Optional[str] = None
        self.answer_s: Optional[float] = None  # the offer's HTTP round trip (answer or refusal), s
        self.retry_after: Optional[str] = None

    async def connect(
        self, session: Optional[dict] = None, headers: Optional[dict] = None, offer_session: Optional[dict] = None
    ) -> int:
        """Offer audio + ``oai-events``; returns the HTTP status (201 when answered).

        ``offer_session`` sends the offer as OpenAI's multipart form (``sdp`` + ``session`` JSON);
        ``session`` is sent as a ``session.update`` once connected.
        """
        transceiver = self.pc.addTransceiver(self.mic, direction="sendrecv")
        if self.low_latency:
            _drop_receive_prefetch(transceiver.receiver)
        if self.codec:
            from aiortc.rtcrtpsender import RTCRtpSender

            wanted = f"audio/{self.codec.lower()}"
            codecs = [c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType.lower() == wanted]
            transceiver.setCodecPreferences(codecs)
        self.channel = channel = self.pc.createDataChannel("oai-events")

        @channel.on("message")
        def on_message(message: str) -> None:
            task = asyncio.ensure_future(self._record(json.loads(message)))
            self._recording.add(task)
            task.add_done_callback(self._recording.discard)

        @self.pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            self._reader = asyncio.ensure_future(self._read(track))

        await self.pc.setLocalDescription(await self.pc.createOffer())
        if offer_session is None:
            payload: object = self.pc.localDescription.sdp
            headers = {"Content-Type": "application/sdp", **(headers or {})}
        else:
            # A content type per part makes it multipart/form-data, as a browser's FormData is.
            payload = aiohttp.FormData()
            payload.add_field("sdp", self.pc.localDescription.sdp, content_type="application/sdp")
            payload.add_field("session", json.dumps(offer_session), content_type="application/json")
        async with aiohttp.ClientSession() as http:
            query = {"gateway_events": ",".join(self.gateway_events)} if self.gateway_events else None
            posted = time.monotonic()
            async with http.post(
                f"{self.base_url}/v1/realtime/calls", data=payload, headers=headers, params=query
            ) as response:
                self.status = response.status
                body = await response.text()
                self.answer_s = time.monotonic() - posted
                if response.status != 201:
                    self.error_body = body
                    self.retry_after = response.headers.get("Retry-After")
                    return response.status
                self.call_id = response.headers["Location"].rsplit("/", 1)[-1]
                auth = (headers or {}).get("Authorization")
                self._hangup_headers = {"Authorization": auth} if auth else {}
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=body, type="answer"))
        await self.wait_for("session.created", timeout=20)
        if session:
            self.send({"type": "session.update", "session": session})
            await self.wait_for("session.updated", timeout=10)
        return 201

    async def _record(self, event: dict) -> None:
        async with self._new_event:
            self.events.append(event)
            self.event_times.append(time.monotonic())
            self._new_event.notify_all()

    async def _read(self, track: MediaStreamTrack) -> None:
        resampler = Resampler(RATE)
        try:
            while True:
                frame = await track.recv()
                if not isinstance(frame, AudioFrame):
                    continue  # an audio track yields AudioFrames only
                self.heard.frames.append(resampler.resample_frame(frame))
                self.heard.arrivals.append(time.monotonic())
        except (MediaStreamError, asyncio.CancelledError):
            return

    def send(self, event: dict) -> None:
        """Send a Realtime client event as JSON on the ``oai-events`` data channel (after connect)."""
        self.send_raw(json.dumps(event))

    def send_raw(self, text: str) -> None:
        """Send ``text`` unchanged, e.g. malformed JSON to check the gateway's ``error`` reply;
        RuntimeError before :meth:`connect`."""
        if self.channel is None:
            raise RuntimeError("not connected: call connect() first")
        self.channel.send(text)

    def ask(self, text: str, response: Optional[dict] = None) -> int:
        """A typed turn: a user ``input_text`` item, then ``response.create`` (with ``response``
        parameters if given). Returns the index of the next event, for ``wait_for(after=...)``."""
        mark = len(self.events)
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        self.send({"type": "conversation.item.create", "item": item})
        self.send({"type": "response.create", **({"response": response} if response else {})})
        return mark

    def say(self, samples: np.ndarray) -> None:
        """Speak int16 48 kHz mono ``samples`` into the call."""
        self.mic.say(samples)

    def of_type(self, event_type: str, after: int = 0) -> list[dict]:
        """Events of ``event_type`` received so far, from index ``after`` on."""
        return [e for e in self.events[after:] if e.get("type") == event_type]

    def time_of(self, event: dict) -> float:
        """time.monotonic() seconds at which ``event`` (one of ``events``) arrived; ValueError if it
        is not there. For latency between two server events, or an event and ``heard.arrivals``."""
        return self.event_times[self.events.index(event)]

    async def wait_for(self, event_type: str, timeout: float = 60.0, count: int = 1, after: int = 0) -> dict:
        """The ``count``-th event of ``event_type`` at index >= ``after``; TimeoutError if none comes."""

        def found() -> Optional[dict]:
            hits = [e for e in self.events[after:] if e.get("type") == event_type]
            return hits[count - 1] if len(hits) >= count else None

        async with self._new_event:
            event = await asyncio.wait_for(self._new_event.wait_for(found), timeout)
        assert event is not None  # Condition.wait_for returns once found() gives an event
        return event

    async def hangup(self) -> None:
        """``DELETE /v1/realtime/calls/{id}`` (with the key the call was made with: a gateway with an
        API key wants it) so the gateway drains the unit now rather than when it notices the peer
        go, then :meth:`close`. Without a call id (refused offer) it only closes."""
        if self.call_id:
            async with aiohttp.ClientSession() as http:
                url = f"{self.base_url}/v1/realtime/calls/{self.call_id}"
                async with http.delete(url, headers=self._hangup_headers) as response:
                    await response.read()
        await self.close()

    async def close(self) -> None:
        """Stop recording and close the peer connection, with no HTTP hang-up: the gateway ends the
        call when it sees the data channel or connection close (as with a closed browser tab)."""
        if self._reader is not None:
            self._reader.cancel()
        await self.pc.close()
