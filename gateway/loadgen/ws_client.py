"""A simulated caller's Realtime WebSocket (``GET /v1/realtime``) with the face of
``gateway.client.RealtimeClient`` that the load generator reads (``events``, ``of_type``,
``time_of``, ``mic``, ``heard``, ``say``, ``connect``, ``hangup``, ``close``), so that one
conversation runs over either transport.

As a microphone client does, it sends 20 ms of PCM16 24 kHz audio every 20 ms (the question's, else
silence) in ``input_audio_buffer.append`` events, and plays the reply as it comes. The
``output_audio_buffer.started`` / ``stopped`` events exist over WebRTC only (the server plays the
audio there); here the client plays it, so it records them itself (``"local": true``): started at a
response's first audio delta, stopped when its audio would have played out (the deltas' duration
from the start, at the earliest when ``response.done`` came).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from typing import Any, Optional

import aiohttp
import numpy as np

from gateway.media.audio_format import PCM16_24K, OutputAudioEncoder, to_linear

FRAME_S = 0.02
RATE = 48000  # what ``say`` takes
OUT_RATE = 24000  # PCM16 24 kHz: the session's default audio format both ways
VOICED = 300  # peak of an int16 delta over which it is the reply's voice, not silence


class _Mic:
    """The question being sent: ``speaking`` while samples are left, ``finished_at`` (monotonic s)
    when its last sample went (None while speaking)."""

    def __init__(self) -> None:
        self.queue = np.zeros(0, np.int16)
        self.finished_at: Optional[float] = None

    @property
    def speaking(self) -> bool:
        return self.queue.size > 0


class _Heard:
    """The reply audio's arrival times, by whether each delta was voiced."""

    def __init__(self) -> None:
        self.voiced: list[float] = []

    def voiced_times(self, level: int = VOICED) -> list[float]:
        return list(self.voiced)


class WebSocketCaller:
    """One call over ``GET /v1/realtime`` of the gateway at ``base_url`` (see the module docstring).
    ``connect`` returns 201 once the socket is open (as an answered WebRTC offer), else the HTTP
    status of the refused upgrade (503 with ``retry_after``)."""

    def __init__(self, base_url: str, gateway_events: tuple[str, ...] = ("gateway.latency", "gateway.barge_in")):
        query = "?model=gpt-realtime" + (f"&gateway_events={','.join(gateway_events)}" if gateway_events else "")
        self.url = (
            base_url.rstrip("/").replace("http://", "ws://").replace("https://", "wss://") + "/v1/realtime" + query
        )
        self.events: list[dict] = []
        self.event_times: list[float] = []
        self.mic = _Mic()
        self.heard = _Heard()
        self.status: Optional[int] = None
        self.error_body: Optional[str] = None
        self.answer_s: Optional[float] = None
        self.retry_after: Optional[str] = None
        self._http: Optional[aiohttp.ClientSession] = None
        self._ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self._tasks: list[asyncio.Task] = []
        self._playing: dict[str, tuple[float, float]] = {}  # response id -> (started at, seconds of audio)
        self._encoder = OutputAudioEncoder(PCM16_24K, RATE)

    async def connect(self, session: Optional[dict] = None, headers: Optional[dict] = None) -> int:
        """Open the socket (``headers``: e.g. ``Authorization``), send ``session`` as a
        ``session.update``; the HTTP status (201: connected)."""
        self._http = aiohttp.ClientSession()
        started = time.monotonic()
        try:
            self._ws = await self._http.ws_connect(self.url, headers=headers or {}, protocols=("realtime",))
        except aiohttp.WSServerHandshakeError as refused:
            self.answer_s = time.monotonic() - started
            self.status = refused.status
            self.retry_after = refused.headers.get("Retry-After") if refused.headers else None
            return refused.status  # (the refusal's body, with its error code, is not read by aiohttp)
        self.answer_s = time.monotonic() - started
        self.status = 201
        self._tasks = [asyncio.ensure_future(self._read()), asyncio.ensure_future(self._talk())]
        if session:
            await self._ws.send_str(json.dumps({"type": "session.update", "session": session}))
        return 201

    def say(self, samples: np.ndarray) -> None:
        """Send int16 48 kHz mono ``samples`` after any still unsent, in real time."""
        self.mic.queue = np.concatenate([self.mic.queue, samples.astype(np.int16)])
        self.mic.finished_at = None

    def of_type(self, event_type: str, after: int = 0) -> list[dict]:
        return [e for e in self.events[after:] if e.get("type") == event_type]

    def time_of(self, event: dict) -> float:
        return self.event_times[self.events.index(event)]

    async def hangup(self) -> None:
        await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._http is not None:
            await self._http.close()

    async def _talk(self) -> None:
        """20 ms of audio every 20 ms: the question's, else silence."""
        assert self._ws is not None
        frame = int(RATE * FRAME_S)
        next_at = time.monotonic()
        while not self._ws.closed:
            chunk, self.mic.queue = self.mic.queue[:frame], self.mic.queue[frame:]
            if chunk.size and not self.mic.queue.size:
                self.mic.finished_at = time.monotonic()
            chunk = np.concatenate([chunk, np.zeros(frame - chunk.size, np.int16)])
            data = base64.b64encode(self._encoder.encode(chunk)).decode()
            await self._ws.send_str(json.dumps({"type": "input_audio_buffer.append", "audio": data}))
            next_at += FRAME_S
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type is aiohttp.WSMsgType.TEXT:
                self._record(json.loads(message.data))

    def _record(self, event: dict[str, Any]) -> None:
        now = time.monotonic()
        self.events.append(event)
        self.event_times.append(now)
        kind = event.get("type")
        if kind in ("response.output_audio.delta", "response.audio.delta"):
            self._played(event["response_id"], base64.b64decode(event["delta"]), now)
        elif kind == "response.done":
            response_id = event["response"]["id"]
            if response_id in self._playing:
                started, seconds = self._playing[response_id]
                wait = max(0.0, started + seconds - now)
                asyncio.get_running_loop().call_later(wait, self._local, "output_audio_buffer.stopped", response_id)

    def _played(self, response_id: str, data: bytes, now: float) -> None:
        samples = to_linear(data, PCM16_24K)
        if response_id not in self._playing:
            self._playing[response_id] = (now, 0.0)
            self._local("output_audio_buffer.started", response_id)
        started, seconds = self._playing[response_id]
        self._playing[response_id] = (started, seconds + samples.size / OUT_RATE)
        if samples.size and int(np.abs(samples).max()) > VOICED:
            self.heard.voiced.append(now)

    def _local(self, event_type: str, response_id: str) -> None:
        self.events.append({"type": event_type, "response_id": response_id, "local": True})
        self.event_times.append(time.monotonic())
