"""The transport tests' Realtime WebSocket client: the product's
(:class:`gateway.loadgen.ws_client.RealtimeSocket`: records every server event, sends client events,
typed turns, reply audio, error codes) as an ``async with`` block, with what only tests want: events
sent by type, audio streamed in chunks at a chosen pace, a sideband's answered turn checked by its
words. The stock SDKs are tested in tests/clients."""

from __future__ import annotations

import asyncio
import base64
from typing import Any, Optional

import numpy as np

from gateway.loadgen.ws_client import RealtimeSocket
from gateway.media.audio_format import PCM16_24K, AudioFormat, OutputAudioEncoder


class EventClient(RealtimeSocket):
    """``async with EventClient(url, ...) as client``: connected to ``GET /v1/realtime``."""

    async def __aenter__(self) -> EventClient:
        await self.open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def send(self, event_type: str, **fields: Any) -> None:
        """Send the client event ``event_type`` with ``fields``."""
        await self.send_event({"type": event_type, **fields})

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

    async def answered_turn(self, question: str, misses: Optional[int] = None) -> str:
        """On a call's sideband: wait for the caller's ``question`` to be transcribed (its
        transcript says it, but ``misses`` of its content words: ``tests.helpers.says``), the
        response to complete and its audio to be played out; returns what the reply said (its
        audio transcript)."""
        from tests.helpers import says

        heard = await self.wait_for("conversation.item.input_audio_transcription.completed", timeout=60)
        assert says(heard["transcript"], question, misses), heard["transcript"]
        done = await self.wait_for("response.done", timeout=90)
        assert done["response"]["status"] == "completed", done
        await self.wait_for("output_audio_buffer.stopped", timeout=60)
        return str(self.of_type("response.output_audio_transcript.done")[-1]["transcript"])
