"""A WebSocket that carries Realtime events (RFC 6455 over aiohttp): server events out as JSON text
frames, in order, without blocking the caller; client events in as text frames.

Reference: the OpenAI Realtime WebSocket transport (``GET /v1/realtime``): every event is one JSON
text frame; binary frames carry nothing. A problem with a frame (binary, too large for the
session's limit, not JSON) is the session's to answer with an ``error``; only a frame above the
hard limit (``MAX_FRAME_BYTES``, aiohttp's ``max_msg_size``) closes the connection (1009).

Reading a frame costs the event loop in proportion to its size (aiohttp unmasks, joins and
decodes it: about 15 ms for 8 MiB), before anything can refuse it, and something for each frame
however small. So a client's frames are read at most ``READ_BYTES_PER_S`` on average, each frame
counting ``FRAME_COST_BYTES`` more (:class:`ReadPace`): a client that sends more waits, frames
unread in its socket, and TCP holds it back; one that keeps to it never waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Optional

from aiohttp import WSCloseCode, WSMsgType, web

from gateway.realtime.wire import encode_event

log = logging.getLogger(__name__)

# The WebSocket subprotocol of the Realtime API, selected when the client offers it.
REALTIME_SUBPROTOCOL = "realtime"
# Frames above this close the connection (aiohttp cannot deliver them); OpenAI takes up to 15 MiB of
# audio in one append. Frames below it but above the session's own limit get an ``error``.
MAX_FRAME_BYTES = 16 * 1024 * 1024
# A reader that lets this many server events pile up unread (about a minute of reply audio in
# 100 ms pieces, with their other events) is gone or stuck: the connection is closed.
MAX_QUEUED_EVENTS = 2000
# ... or this many bytes of them: one ``session.update`` of ~40 bytes is answered with the whole
# session (4 MB with 128 tools of 32 KB), so a client that reads nothing made the server queue
# 4 MB per event (+1.6 GB in 8 s on loopback) long before 2000 of them.
MAX_QUEUED_BYTES = 64 * 1024 * 1024
# Seconds between pings; a client that does not answer in time is taken as gone.
HEARTBEAT_S = 20.0
# Bytes of client frames read a second on average, and at once: far above what a session uses
# (audio at its budget, 4x real time, is 256 KiB/s of base64 24 kHz PCM; a burst of it, 20 s, is
# 1.25 MiB), far below what a loop can read while it serves other calls.
READ_BYTES_PER_S = 1024 * 1024
READ_BURST_BYTES = 4 * 1024 * 1024
# The longest wait before the next frame is read, s (well inside the heartbeat): a client owes at
# most this much reading time, so one that stops flooding is read as usual again within it.
MAX_READ_PAUSE_S = HEARTBEAT_S / 4
# What each frame costs beside its bytes: a flood of empty frames is read at most ~1000 a second
# (a client sends a few dozen: audio chunks and events), not a million that starve the loop.
FRAME_COST_BYTES = 1024
# Frames handled in a row before the reader lets the loop run others (aiohttp queues many small
# frames at once, and reading a queued one does not yield).
FRAMES_PER_TURN = 64
# Seconds the server events still queued at close may take to be written out.
FLUSH_TIMEOUT_S = 2.0


def websocket_response(offered: list[str]) -> web.WebSocketResponse:
    """The aiohttp WebSocket for a Realtime client that offered the subprotocols ``offered``: it
    selects ``realtime`` when offered (else the first one offered, so that a browser, which fails
    a handshake that selects none of its offers, still connects), frames up to ``MAX_FRAME_BYTES``,
    no compression (base64 audio does not compress; the CPU is the models')."""
    protocols = (REALTIME_SUBPROTOCOL,) if REALTIME_SUBPROTOCOL in offered or not offered else (offered[0],)
    return web.WebSocketResponse(
        protocols=protocols, max_msg_size=MAX_FRAME_BYTES, compress=False, heartbeat=HEARTBEAT_S
    )


class ReadPace:
    """A token bucket over the bytes of one connection's client frames: ``burst`` bytes at once,
    ``per_second`` after; the debt a large frame leaves is capped at ``MAX_READ_PAUSE_S`` of
    reading. :meth:`delay` says how long to wait before reading the next frame."""

    def __init__(
        self,
        per_second: float = READ_BYTES_PER_S,
        burst: float = READ_BURST_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def delay(self, size: int) -> float:
        """Seconds to wait after a frame of ``size`` bytes (counted ``FRAME_COST_BYTES`` more; 0:
        read on): until the bucket is back to zero, at most ``MAX_READ_PAUSE_S``."""
        now = self._clock()
        tokens = min(self.burst, self._tokens + (now - self._at) * self.per_second) - size - FRAME_COST_BYTES
        self._tokens = max(tokens, -MAX_READ_PAUSE_S * self.per_second)
        self._at = now
        return -self._tokens / self.per_second if self._tokens < 0 else 0.0


class EventSocket:
    """Server events out through one writer task (so that :meth:`send` never blocks and order is
    kept), client frames in through :meth:`receive`. ``ws`` must be prepared."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws
        self._queue: asyncio.Queue[Optional[str]] = asyncio.Queue()
        self._queued_bytes = 0
        self._closing = False
        self._writer = asyncio.ensure_future(self._write())
        self._closer: Optional[asyncio.Future[Any]] = None  # held: not collected mid-run

    def send(self, event: dict[str, Any]) -> None:
        """Queue a server event (JSON text, :func:`~gateway.realtime.wire.encode_event`: UTF-8 as
        it is); dropped once the socket is closing. A reader that let
        ``MAX_QUEUED_EVENTS`` or ``MAX_QUEUED_BYTES`` pile up is disconnected (1008)."""
        if self._closing:
            return
        text = encode_event(event)
        if self._queue.qsize() >= MAX_QUEUED_EVENTS or self._queued_bytes + len(text) > MAX_QUEUED_BYTES:
            log.warning(
                "websocket client reads no events (%d queued, %d bytes): closing",
                self._queue.qsize(),
                self._queued_bytes,
            )
            self._closing = True
            self._writer.cancel()
            while not self._queue.empty():  # what it did not read is let go of now
                self._queue.get_nowait()
            self._queued_bytes = 0
            self._closer = asyncio.ensure_future(
                self.ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"client too slow")
            )
            return
        self._queued_bytes += len(text)
        self._queue.put_nowait(text)

    async def _write(self) -> None:
        while True:
            text = await self._queue.get()
            if text is None:
                return
            self._queued_bytes -= len(text)
            try:
                await self.ws.send_str(text)
            except (ConnectionError, RuntimeError):  # the connection went away: nothing more can be sent
                return

    async def receive(self, on_text: Callable[[str], None], on_binary: Callable[[bytes], None]) -> None:
        """Hand each text frame to ``on_text`` and each binary frame to ``on_binary``, until the
        client closes, the connection drops, or a frame over ``MAX_FRAME_BYTES`` arrives; frames
        are read at the connection's :class:`ReadPace`."""
        pace = ReadPace()
        frames = 0
        async for message in self.ws:
            if message.type is WSMsgType.TEXT:
                on_text(message.data)
            elif message.type is WSMsgType.BINARY:
                on_binary(message.data)
            elif message.type is WSMsgType.ERROR:
                log.info("websocket closed on error: %s", self.ws.exception())
                return
            else:
                continue
            frames += 1
            delay = pace.delay(len(message.data))
            if delay > 0 or frames % FRAMES_PER_TURN == 0:
                await asyncio.sleep(delay)

    async def close(self, code: int = WSCloseCode.OK, message: str = "") -> None:
        """Write out what is queued (within ``FLUSH_TIMEOUT_S``), then close with ``code``."""
        if not self._closing:
            self._closing = True
            self._queue.put_nowait(None)
        await asyncio.wait({self._writer}, timeout=FLUSH_TIMEOUT_S)
        self._writer.cancel()
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.ws.close(code=code, message=message.encode()[:120])
