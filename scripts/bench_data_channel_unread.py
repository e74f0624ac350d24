#!/usr/bin/env python3
"""A WebRTC caller whose SCTP stops acknowledging the gateway's data: how far the gateway's unsent
``oai-events`` queue and memory grow.

    .venv/bin/python scripts/bench_data_channel_unread.py [--rate 50] [--seconds 20] [--no-guard]

Starts a gateway in this process on the offline default models (a pool of 1) and calls it with a
real aiortc peer (``gateway.client.RealtimeClient``). Once ``session.created`` is in, the peer's
SCTP drops every DATA chunk it receives, unacknowledged: what a stack whose receive window is full
does with data sent past it (aiortc sends whatever the window says), or a peer that never reads.
Its own sending goes on (the gateway's acknowledgements still reach it). It sets tools and
instructions within the default limits (2 tools, ~60 KB of JSON, 15,000 characters; each
``session.updated`` echoes them: ~57 KB of ``bufferedAmount`` per update measured), then sends
``--rate`` small ``session.update`` events a second (under the client-event rate, 100/s) for
``--seconds``, each answered with the whole session.

Every 2 s: the gateway channel's ``bufferedAmount`` (bytes queued unsent), the SCTP chunks waiting
or in flight, this process's RSS (the gateway and the peer: the peer drops what it gets), and
whether the call still lives; then the peer hangs up and the unit's state and close reason are
printed. ``--no-guard`` lifts the gateway's bound (``MAX_UNSENT_EVENT_BYTES``) to show what
aiortc alone does. Set PYTHONPATH to the checkout to measure (the code run is printed). Memory
only: run it under ``flock -s /work/cpu.lock``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import socket
import time
from pathlib import Path
from typing import Any, Optional


def rss_mb() -> float:
    """This process's resident set, MB (``/proc/self/status`` VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_deaf(client: Any) -> None:
    """The peer's SCTP takes no more DATA: each chunk is dropped, never acknowledged."""

    async def drop(chunk: Any) -> None:
        return None

    client.pc.sctp._receive_data_chunk = drop


async def run(rate: float, seconds: float, guard: bool) -> None:
    import gateway
    import gateway.transports.webrtc.call as webrtc_call
    from gateway.client import RealtimeClient
    from gateway.config import GatewayConfig
    from gateway.models.loader import load_models
    from gateway.server.app_keys import POOL, SESSIONS
    from gateway.server.runner import running_gateway

    print(f"code: {Path(gateway.__file__).resolve().parent}")
    if not guard:
        webrtc_call.MAX_UNSENT_EVENT_BYTES = 1 << 62
    print(f"bound: {'none (lifted)' if not guard else webrtc_call.MAX_UNSENT_EVENT_BYTES} bytes unsent")
    models = load_models(GatewayConfig())
    config = GatewayConfig(port=free_port(), pool_size=1, talking_capacity=1)
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": "Look the weather up. " * 1400, "parameters": {}}
        for i in range(2)
    ]
    async with running_gateway(config, models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        await client.wait_for("session.created", timeout=20)
        session = next(iter(app[SESSIONS].sessions.values()))
        call: Any = session.transport
        unit = app[POOL].units[0]
        gc.collect()
        base = rss_mb()
        make_deaf(client)
        client.send({"type": "session.update", "session": {"tools": tools, "instructions": "Be brief. " * 1500}})
        small = json.dumps({"type": "session.update", "session": {"instructions": "Hi."}})
        print(f"\nRSS at start {base:.0f} MB; {rate:g} session.update/s for {seconds:g} s\n")
        print("| t s | updates sent | gateway bufferedAmount MB | SCTP chunks queued / in flight | RSS +MB | call |")
        print("|---:|---:|---:|---:|---:|---|")
        started = time.monotonic()
        sent = 0
        next_row = 0.0
        ended_at: Optional[float] = None
        while (elapsed := time.monotonic() - started) < seconds + 4.0:
            if elapsed < seconds and client.channel is not None and client.channel.readyState == "open":
                while sent < int(elapsed * rate):
                    client.send_raw(small)
                    sent += 1
            if session.end_reason is not None and ended_at is None:
                ended_at = elapsed
            if elapsed >= next_row:
                channel = call.channel
                sctp = call.pc.sctp
                buffered = channel.bufferedAmount if channel is not None else 0
                queued = len(sctp._outbound_queue) if sctp is not None else 0
                flight = len(sctp._sent_queue) if sctp is not None else 0
                state = session.end_reason or "live"
                print(
                    f"| {elapsed:.0f} | {sent} | {buffered / 2**20:.1f} | {queued} / {flight} "
                    f"| {rss_mb() - base:+.0f} | {state} |",
                    flush=True,
                )
                next_row += 2.0
            await asyncio.sleep(0.01)
        await client.close()
        gc.collect()
        await asyncio.sleep(1.0)
        when = f" at {ended_at:.1f} s" if ended_at is not None else ""
        print(
            f"\ncall end: {session.end_reason or 'still live'}{when}; unit {unit.state.name} "
            f"(close reason {unit.close_reason}); RSS after hang-up {rss_mb() - base:+.0f} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="session.update events a second")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the peer sends")
    parser.add_argument("--no-guard", action="store_true", help="lift the gateway's MAX_UNSENT_EVENT_BYTES")
    args = parser.parse_args()
    asyncio.run(run(args.rate, args.seconds, not args.no_guard))


if __name__ == "__main__":
    main()
