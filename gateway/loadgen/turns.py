"""Waiting on a call's server events (WebRTC or WebSocket: :class:`CallClient`) for one turn: the
response that answers the caller's last words, its events, its first voiced audio; and the nearest-
rank percentile the tables use. Shared by the load generator and the latency benchmarks."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Optional, Protocol

import aiohttp


class CallClient(Protocol):
    """What the load generator reads of a call: ``gateway.client.RealtimeClient`` (WebRTC) or
    ``gateway.loadgen.ws_client.WebSocketCaller`` (the Realtime WebSocket)."""

    events: list[dict]
    answer_s: Optional[float]
    retry_after: Optional[str]
    error_body: Optional[str]

    @property
    def mic(self) -> Any: ...  # ``speaking``, ``finished_at``

    @property
    def heard(self) -> Any: ...  # ``voiced_times()``

    def of_type(self, event_type: str, after: int = 0) -> list[dict]: ...

    def time_of(self, event: dict) -> float: ...

    def say(self, samples: Any) -> None: ...

    async def connect(self, session: Optional[dict] = None, headers: Optional[dict] = None) -> int: ...

    async def hangup(self) -> None: ...

    async def close(self) -> None: ...


async def wait_pool_idle(
    url: str, timeout: float = 30.0, headers: Optional[dict] = None, required: bool = True
) -> bool:
    """Wait until ``GET /v1/pool`` shows no unit in use (active, draining or stuck: a hung-up call's
    unit drains first), so that the next offer is not refused and what a call's end counts has
    landed. ``headers``: e.g. ``Authorization`` (a gateway with an API key wants it on
    ``/v1/pool``). True once idle; after ``timeout`` s RuntimeError, or False when not ``required``;
    PermissionError at once when the gateway refuses the key (401, 403: waiting would not help)."""
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            async with http.get(f"{url}/v1/pool", headers=headers) as response:
                if response.status in (401, 403):
                    raise PermissionError(
                        f"GET /v1/pool: {response.status} {(await response.text())[:200]} (give the gateway's API key)"
                    )
                body = await response.json() if response.status == 200 else {}
                if body.get("in_use") == 0:
                    return True
            await asyncio.sleep(0.1)
    if required:
        raise RuntimeError("the pool did not become idle")
    return False


async def event_for(client: CallClient, event_type: str, response_id: str, timeout: float = 10.0) -> dict:
    """The ``event_type`` event of ``response_id`` (it may come after response.done), within
    ``timeout`` s; RuntimeError if none comes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in client.of_type(event_type) if e.get("response_id") == response_id]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no {event_type} for {response_id}")


async def final_turn_response(client: CallClient, tail_s: float, after: int = 0, timeout: float = 120.0) -> dict:
    """The response.done (completed or incomplete) of the reply to the caller's last turn, among
    the events from index ``after`` on: the first response created after the commit that follows
    the end of speech (or, 3 s after the audio is sent, after the last commit). A recording with
    long pauses (JFK's) is several turns; earlier ones may be answered (and interrupted) before it
    ends. ``tail_s``: the silence after the speech in the audio sent. RuntimeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished = None if client.mic.speaking else client.mic.finished_at
        commits = client.of_type("input_audio_buffer.committed", after)
        # The last turn's commit: one after the end of speech, or the last one once no other can come.
        final = [e for e in commits if finished is not None and client.time_of(e) >= finished - tail_s]
        if not final and finished is not None and commits and time.monotonic() > finished + 3.0:
            final = commits[-1:]
        if final:
            committed_at = client.time_of(final[0])
            created = [
                e["response"]["id"]
                for e in client.of_type("response.created", after)
                if client.time_of(e) >= committed_at
            ]
            for done in client.of_type("response.done", after):
                if done["response"]["id"] in created and done["response"]["status"] in ("completed", "incomplete"):
                    return done
        await asyncio.sleep(0.02)
    raise RuntimeError("the last turn got no completed response")


async def voiced_since(client: CallClient, since: float) -> list[float]:
    """Arrival times of voiced reply frames at or after ``since``, waiting up to 5 s for the first
    (a short reply's response.done and playback start can come before its audio reaches the client)."""
    deadline = time.monotonic() + 5.0
    while True:
        voiced = [t for t in client.heard.voiced_times() if t >= since]
        if voiced or time.monotonic() > deadline:
            return voiced
        await asyncio.sleep(0.02)


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]
