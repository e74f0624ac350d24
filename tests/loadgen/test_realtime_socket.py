"""The Realtime WebSocket client every test and the load generator use
(:class:`gateway.loadgen.ws_client.RealtimeSocket`), against small aiohttp servers on loopback that
misbehave: a frame that is not JSON must end the waiting at once with the reason (before: the
reader died silently and every ``wait_for`` ran to its timeout), and ``close`` must return, not
raise, when the reader does not finish (before: the 5 s timeout escaped from ``close``)."""

from __future__ import annotations

import time

import pytest
from aiohttp import web

from gateway.loadgen import ws_client
from gateway.loadgen.ws_client import RealtimeSocket


async def serve(*frames: str) -> tuple[web.AppRunner, str]:
    """A ``/v1/realtime`` server on loopback that sends ``frames`` (text) on connecting, then keeps
    the socket open until the client closes it; (its runner, its URL)."""

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("realtime",))
        await ws.prepare(request)
        for frame in frames:
            await ws.send_str(frame)
        async for _ in ws:
            pass
        return ws

    app = web.Application()
    app.router.add_get("/v1/realtime", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def test_a_frame_that_is_not_json_ends_the_wait_with_the_reason():
    runner, url = await serve('{"type": "session.created", "event_id": "e1"}', "this is not json")
    socket = RealtimeSocket(url)
    try:
        await socket.open()
        assert (await socket.wait_for("session.created", timeout=5))["event_id"] == "e1"
        started = time.monotonic()
        with pytest.raises(ConnectionError, match="reading failed"):
            await socket.wait_for("response.done", timeout=20)
        assert time.monotonic() - started < 5
        assert socket.closed.is_set() and socket.read_error is not None
    finally:
        await socket.close()
        await runner.cleanup()


async def test_an_event_that_is_not_an_object_ends_the_wait():
    runner, url = await serve("[1, 2, 3]")
    socket = RealtimeSocket(url)
    try:
        await socket.open()
        with pytest.raises(ConnectionError, match="not a JSON object"):
            await socket.wait_for("session.created", timeout=20)
    finally:
        await socket.close()
        await runner.cleanup()


async def test_close_returns_when_the_reader_does_not_finish(monkeypatch):
    monkeypatch.setattr(ws_client, "CLOSE_WAIT_S", 0.5, raising=False)

    runner, url = await serve('{"type": "session.created"}')
    socket = RealtimeSocket(url)
    try:
        await socket.open()
        await socket.wait_for("session.created", timeout=5)
        # The reader cannot finish while its lock is held (as by a caller inside wait_for's
        # condition): close still returns, having cancelled it.
        async with socket._changed:
            started = time.monotonic()
            await socket.close()
            assert time.monotonic() - started < 10
        assert socket._reader is not None and socket._reader.done()
    finally:
        await runner.cleanup()
