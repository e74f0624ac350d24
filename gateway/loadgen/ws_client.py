"""A Realtime WebSocket client (``GET /v1/realtime``, aiohttp): :class:`RealtimeSocket` records
every server event and when it came and sends client events (typed turns, raw frames); on it,
:class:`WebSocketCaller`, a simulated caller with the face of ``gateway.client.RealtimeClient`` that
the load generator reads (``events``, ``of_type``, ``time_of``, ``mic``, ``heard``, ``say``,
``connect``, ``hangup``, ``close``), so that one conversation runs over either transport.

As a microphone client does, the caller sends 20 ms of PCM16 24 kHz audio every 20 ms (the
question's, else silence) in ``input_audio_buffer.append`` events, and plays the reply as it comes.
The ``output_audio_buffer.started`` / ``stopped`` events exist over WebRTC only (the server plays the
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

from gateway.media.audio_format import PCM16_24K, AudioFormat, OutputAudioEncoder, to_linear
from gateway.realtime.events import GA_TO_BETA

FRAME_S = 0.02
RATE = 48000  # what ``say`` takes
OUT_RATE = 24000  # PCM16 24 kHz: the session's default audio format both ways
VOICED = 300  # peak of an int16 delta over which it is the reply's voice, not silence
AUDIO_DELTAS = ("response.output_audio.delta", GA_TO_BETA["response.output_audio.delta"])  # GA, beta
CLOSE_WAIT_S = 5.0  # how long close() waits for the reader to record the last events
REFUSAL_READ_S = 5.0  # how long open() reads the body of a refused upgrade at most


class RealtimeSocket:
    """One Realtime WebSocket to the gateway at ``base_url`` (``http(s)://host:port``):
    ``GET /v1/realtime`` + ``query`` (default ``?model=gpt-realtime``), ``headers`` (e.g.
    ``Authorization``), offering the subprotocols ``protocols``. Every server event is kept in
    ``events``, its arrival (time.monotonic() s) in ``event_times``; ``closed`` is set once the
    server's side of the socket is closed, or once reading it failed (a frame that is not JSON:
    ``read_error`` holds why). :meth:`open` connects, :meth:`close` ends it."""

    def __init__(
        self,
        base_url: str,
        query: str = "?model=gpt-realtime",
        headers: Optional[dict] = None,
        protocols: tuple[str, ...] = ("realtime",),
    ) -> None:
        http_url = base_url.rstrip("/")
        self.url = http_url.replace("http://", "ws://").replace("https://", "wss://") + "/v1/realtime" + query
        self.headers = headers or {}
        self.protocols = protocols
        self.events: list[dict] = []
        self.event_times: list[float] = []
        self.closed = asyncio.Event()
        self.read_error: Optional[BaseException] = None
        self.refusal_body: Optional[str] = None  # the body of a refused upgrade (not 101), if any
        self.ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self._http: Optional[aiohttp.ClientSession] = None
        self._reader: Optional[asyncio.Task] = None
        self._changed = asyncio.Condition()

    async def open(self) -> None:
        """Connect and start recording events; aiohttp's ``WSServerHandshakeError`` (its ``status``:
        e.g. 401, 503) when the gateway refuses the upgrade, the refusal's body (the gateway's JSON
        ``error``: its code and why) in :attr:`refusal_body`. aiohttp does not read the body of a
        handshake it refuses, so the answer is read as it comes in (a trace's ``on_request_end``)."""
        self._http = aiohttp.ClientSession(trace_configs=[self._refusal_reader()])
        try:
            self.ws = await self._http.ws_connect(
                self.url, headers=self.headers, protocols=self.protocols, max_msg_size=0
            )
        except BaseException:
            await self._http.close()
            raise
        self._reader = asyncio.ensure_future(self._read())

    def _refusal_reader(self) -> aiohttp.TraceConfig:
        """A trace that keeps the body of an upgrade the server refused (any status but 101) in
        :attr:`refusal_body`, read before aiohttp raises ``WSServerHandshakeError``."""
        trace = aiohttp.TraceConfig()

        async def on_request_end(_session: Any, _context: Any, params: aiohttp.TraceRequestEndParams) -> None:
            response = params.response
            if response.status != 101:
                with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, UnicodeDecodeError):
                    self.refusal_body = (await asyncio.wait_for(response.read(), REFUSAL_READ_S)).decode()

        trace.on_request_end.append(on_request_end)
        return trace

    async def close(self) -> None:
        """Close the socket, wait (:data:`CLOSE_WAIT_S` at most) for the last events to be recorded
        (a reader still busy then is cancelled), end the session. Never raises for a reader that
        failed or hung: that is :attr:`read_error` / the events it recorded."""
        try:
            if self.ws is not None:
                await self.ws.close()
            if self._reader is not None and not self._reader.done():
                finished, _ = await asyncio.wait({self._reader}, timeout=CLOSE_WAIT_S)
                if not finished:
                    self._reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._reader
        finally:
            if self._http is not None:
                await self._http.close()

    async def _read(self) -> None:
        """Record server events until the socket closes or a frame cannot be read (not JSON, not
        an object): then :attr:`read_error`; either way ``closed`` is set, so waiters stop waiting."""
        assert self.ws is not None
        try:
            async for message in self.ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    event = json.loads(message.data)
                    if not isinstance(event, dict):
                        raise ValueError(f"server event is not a JSON object: {message.data[:80]!r}")
                    async with self._changed:
                        self._record(event, time.monotonic())
                        self._changed.notify_all()
        except Exception as failed:
            self.read_error = failed
        finally:
            async with self._changed:
                self.closed.set()
                self._changed.notify_all()

    def _record(self, event: dict[str, Any], now: float) -> None:
        """Keep one server event that arrived at ``now`` (monotonic s); subclasses add to it."""
        self.events.append(event)
        self.event_times.append(now)

    # ----- sending -----
    async def send_event(self, event: dict) -> None:
        """Send a Realtime client event as JSON (after :meth:`open`)."""
        await self.send_raw(json.dumps(event))

    async def send_raw(self, data: str | bytes) -> None:
        """Send ``data`` unchanged (text, or a binary frame), e.g. to check the gateway's ``error``."""
        assert self.ws is not None, "not connected: open() first"
        if isinstance(data, bytes):
            await self.ws.send_bytes(data)
        else:
            await self.ws.send_str(data)

    async def ask(self, text: str, **response: Any) -> int:
        """A typed turn: a user ``input_text`` item, then ``response.create`` (with ``response``
        parameters if given). Returns the index of the next event, for ``wait_for(after=...)``."""
        mark = len(self.events)
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        await self.send_event({"type": "conversation.item.create", "item": item})
        await self.send_event({"type": "response.create", **({"response": response} if response else {})})
        return mark

    # ----- reading -----
    def of_type(self, event_type: str, after: int = 0) -> list[dict]:
        """Events of ``event_type`` received so far, from index ``after`` on."""
        return [e for e in self.events[after:] if e.get("type") == event_type]

    def time_of(self, event: dict) -> float:
        """time.monotonic() seconds at which ``event`` (one of ``events``) arrived; ValueError if not there."""
        return self.event_times[self.events.index(event)]

    async def wait_for(self, event_type: str, timeout: float = 60.0, count: int = 1, after: int = 0) -> dict:
        """The ``count``-th event of ``event_type`` from index ``after`` on: TimeoutError after
        ``timeout`` s, ConnectionError (with the last event types) when the socket closes first."""

        def found() -> Optional[dict]:
            hits = self.of_type(event_type, after)
            return hits[count - 1] if len(hits) >= count else None

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: found() is not None or self.closed.is_set()), timeout)
        event = found()
        if event is None:
            why = f" (reading failed: {self.read_error!r})" if self.read_error is not None else ""
            last = [e.get("type") for e in self.events][-8:]
            raise ConnectionError(f"socket closed before {event_type}{why}: {last}")
        return event

    def audio(self, fmt: AudioFormat = PCM16_24K, after: int = 0, response_id: Optional[str] = None) -> np.ndarray:
        """The reply audio received from index ``after`` on (of ``response_id``, else every
        response's), decoded from ``fmt`` (the session's output format): int16 mono, shape (n,)."""
        deltas = [
            e for e in self.events[after:] if e["type"] in AUDIO_DELTAS and response_id in (None, e["response_id"])
        ]
        data = b"".join(base64.b64decode(e["delta"]) for e in deltas)
        return to_linear(data, fmt) if data else np.zeros(0, np.int16)

    def error_codes(self, after: int = 0) -> list[Optional[str]]:
        """The ``code`` of each ``error`` event from index ``after`` on."""
        return [e["error"]["code"] for e in self.of_type("error", after)]


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


class WebSocketCaller(RealtimeSocket):
    """One simulated call over ``GET /v1/realtime`` of the gateway at ``base_url`` (see the module
    docstring). ``connect`` returns 201 once the socket is open (as an answered WebRTC offer), else
    the HTTP status of the refused upgrade (503 with ``retry_after`` and ``error_body``: the
    gateway's JSON error)."""

    def __init__(self, base_url: str, gateway_events: tuple[str, ...] = ("gateway.latency", "gateway.barge_in")):
        query = "?model=gpt-realtime" + (f"&gateway_events={','.join(gateway_events)}" if gateway_events else "")
        super().__init__(base_url, query)
        self.mic = _Mic()
        self.heard = _Heard()
        self.status: Optional[int] = None
        self.error_body: Optional[str] = None
        self.answer_s: Optional[float] = None
        self.retry_after: Optional[str] = None
        self._talker: Optional[asyncio.Task] = None
        self._playing: dict[str, tuple[float, float]] = {}  # response id -> (started at, seconds of audio)
        self._encoder = OutputAudioEncoder(PCM16_24K, RATE)

    async def connect(self, session: Optional[dict] = None, headers: Optional[dict] = None) -> int:
        """Open the socket (``headers``: e.g. ``Authorization``), send ``session`` as a
        ``session.update``; the HTTP status (201: connected)."""
        self.headers = headers or {}
        started = time.monotonic()
        try:
            await self.open()
        except aiohttp.WSServerHandshakeError as refused:
            self.answer_s = time.monotonic() - started
            self.status = refused.status
            self.retry_after = refused.headers.get("Retry-After") if refused.headers else None
            self.error_body = self.refusal_body  # the gateway's JSON error: its code and why
            return refused.status
        self.answer_s = time.monotonic() - started
        self.status = 201
        self._talker = asyncio.ensure_future(self._talk())
        if session:
            await self.send_event({"type": "session.update", "session": session})
        return 201

    def say(self, samples: np.ndarray) -> None:
        """Send int16 48 kHz mono ``samples`` after any still unsent, in real time."""
        self.mic.queue = np.concatenate([self.mic.queue, samples.astype(np.int16)])
        self.mic.finished_at = None

    async def hangup(self) -> None:
        await self.close()

    async def close(self) -> None:
        if self._talker is not None:
            self._talker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._talker
        with contextlib.suppress(Exception):
            await super().close()

    async def _talk(self) -> None:
        """20 ms of audio every 20 ms: the question's, else silence."""
        assert self.ws is not None
        frame = int(RATE * FRAME_S)
        next_at = time.monotonic()
        while not self.ws.closed:
            chunk, self.mic.queue = self.mic.queue[:frame], self.mic.queue[frame:]
            if chunk.size and not self.mic.queue.size:
                self.mic.finished_at = time.monotonic()
            chunk = np.concatenate([chunk, np.zeros(frame - chunk.size, np.int16)])
            data = base64.b64encode(self._encoder.encode(chunk)).decode()
            await self.ws.send_str(json.dumps({"type": "input_audio_buffer.append", "audio": data}))
            next_at += FRAME_S
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    def _record(self, event: dict[str, Any], now: float) -> None:
        super()._record(event, now)
        kind = event.get("type")
        if kind in AUDIO_DELTAS:
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
