"""A caller in its own process, for the abrupt-drop test: it connects, speaks, reports when the
answer starts playing, and then waits to be killed (no hang-up, no close)."""

import asyncio
import sys

import numpy as np

from gateway.client import RealtimeClient


async def main(url: str, speech_file: str) -> None:
    client = RealtimeClient(url)
    if await client.connect() != 201:
        print("REFUSED", flush=True)
        return
    print(f"CALL {client.call_id}", flush=True)
    client.say(np.load(speech_file))
    await client.wait_for("output_audio_buffer.started", timeout=120)
    print("PLAYING", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
