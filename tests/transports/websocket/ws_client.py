"""A bare Realtime WebSocket client for the transport tests (aiohttp): records every server event,
sends client events, streams audio in real time. The stock SDKs are tested in tests/clients."""

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


class EventClient:
    """``async with EventClient(url, ...) as client``: connected to ``GET /v1/realtime``."""

    def __init__(
        self,
        base_url: str,
        query: str = "?model=gpt-realtime",
        headers: Optional[dict] = None,
        protocols: tuple[str, ...] = ("realtime",),
    ) -> None:
        self.url = base_url.replace("http://", "ws://") + "/v1/realtime" + query
        self.headers = headers or {}
        self.protocols = protocols
        self.events: list[dict] = []
        self.times: list[float] = []
        self.closed = asyncio.Event()
        self._http: Optional[aiohttp.ClientSession] = None
        self.ws: Optional[aiohttp.ClientWebSocketResponse] = None
        self._reader: Optional[asyncio.Task] = None
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> EventClient:
        self._http = aiohttp.ClientSession()
        try:
            self.ws = await self._http.ws_connect(
                self.url, headers=self.headers, protocols=self.protocols, max_msg_size=0
            )
        except BaseException:
            await self._http.close()
            raise
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 5)
        if self._http is not None:
            await self._http.close()

    async def _read(self) -> None:
        assert self.ws is not None
        async for message in self.ws:
            if message.type is aiohttp.WSMsgType.TEXT:
                async with self._changed:
                    self.events.append(json.loads(message.data))
                    self.times.append(time.monotonic())
                    self._changed.notify_all()
        async with self._changed:
            self.closed.set()
            self._changed.notify_all()

    # ----- sending -----
    async def send(self, event_type: str, **fields: Any) -> None:
        assert self.ws is not None
        await self.ws.send_str(json.dumps({"type": event_type, **fields}))

    async def send_raw(self, data: str | bytes) -> None:
        assert self.ws is not None
        if isinstance(data, bytes):
            await self.ws.send_bytes(data)
        else:
            await self.ws.send_str(data)

    async def ask(self, text: str, **response: Any) -> int:
        """A typed turn; returns the index of the next event (for ``after=``)."""
        mark = len(self.events)
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        await self.send("conversation.item.create", item=item)
        await self.send("response.create", **({"response": response} if response else {}))
        return mark

    async def stream(
        self,
        samples_48k: np.ndarray,
        fmt: AudioFormat = PCM16_24K,
        chunk_ms: int = 100,
        silence_s: float = 0.0,
        pace: float = 1.0,
    ) -> None:
        """Append 48 kHz speech (then ``silence_s`` of silence) in ``fmt``, ``chunk_ms`` a chunk, at
        ``pace`` times real time, as a microphone client does."""
        audio = np.concatenate([samples_48k, np.zeros(int(48000 * silence_s), np.int16)])
        encoder = OutputAudioEncoder(fmt, 48000)
        step = 48 * chunk_ms
        for start in range(0, audio.size, step):
            data = encoder.encode(audio[start : start + step])
            await self.send("input_audio_buffer.append", audio=base64.b64encode(data).decode())
            await asyncio.sleep(chunk_ms / 1000 / pace)

    # ----- reading -----
    async def answered_turn(self, question: str) -> str:
        """On a call's sideband: wait for the caller's ``question`` to be transcribed (its
        transcript says it), the response to complete and its audio to be played out; returns what
        the reply said (its audio transcript)."""
        from tests.helpers import says

        heard = await self.wait_for("conversation.item.input_audio_transcription.completed", within=60)
        assert says(heard["transcript"], question), heard["transcript"]
        done = await self.wait_for("response.done", within=90)
        assert done["response"]["status"] == "completed", done
        await self.wait_for("output_audio_buffer.stopped", within=60)
        return str(self.of_type("response.output_audio_transcript.done")[-1]["transcript"])

    def of_type(self, event_type: str, after: int = 0) -> list[dict]:
        return [e for e in self.events[after:] if e.get("type") == event_type]

    async def wait_for(self, event_type: str, within: float = 60.0, after: int = 0, count: int = 1) -> dict:
        """The ``count``-th event of ``event_type`` from index ``after`` on, within ``within`` s."""

        def found() -> Optional[dict]:
            hits = self.of_type(event_type, after)
            return hits[count - 1] if len(hits) >= count else None

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: found() is not None or self.closed.is_set()), within)
        event = found()
        if event is None:
            raise AssertionError(f"socket closed before {event_type}: {[e['type'] for e in self.events][-8:]}")
        return event

    def audio(self, fmt: AudioFormat = PCM16_24K, after: int = 0, response_id: Optional[str] = None) -> np.ndarray:
        """The reply audio received (``response.output_audio.delta`` or beta ``response.audio.delta``)."""
        deltas = [
            e
            for e in self.events[after:]
            if e["type"] in ("response.output_audio.delta", "response.audio.delta")
            and response_id in (None, e["response_id"])
        ]
        data = b"".join(base64.b64decode(e["delta"]) for e in deltas)
        return to_linear(data, fmt) if data else np.zeros(0, np.int16)

    def error_codes(self, after: int = 0) -> list[Optional[str]]:
        return [e["error"]["code"] for e in self.of_type("error", after)]
