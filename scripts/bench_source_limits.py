#!/usr/bin/env python3
"""One source holding the gateway: how many sessions and HTTP connections one address gets.

    PYTHONPATH=<checkout> .venv/bin/python scripts/bench_source_limits.py [--pool-size 8] [--connections 1000]

Starts a gateway in this process on the offline default models (``--pool-size``, talking capacity
the pool size, so that admission by compute does not decide), then, on loopback:

1. **sessions**: the deployment of ``deploy/nginx.conf`` (a proxy on loopback naming the client in
   ``X-Forwarded-For``): one client, 203.0.113.7, sends ``--pool-size`` + 4 WebRTC offers
   (``POST /v1/realtime/calls``) and 4 Realtime WebSockets, one after another; then another client
   of the same proxy sends one offer. Printed: the statuses each got, the pool's units held.
2. **connections**: one address, 127.0.0.2 (not trusted, not unlimited: ``--trusted-proxies`` and
   ``--unlimited-sources`` 127.0.0.1 on a checkout that has them), opens ``--connections`` TCP
   connections to the HTTP port and sends nothing; 2 s later, how many the gateway still holds
   open and how many it answered (status) and closed, and how long ``/healthz`` took from
   127.0.0.3 meanwhile.

Bounded: at most pool + 8 sessions and ``--connections`` sockets, each step under 60 s. Set
PYTHONPATH to the checkout to measure (its commit is printed). Counts only: ``flock -s``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

ATTACKER = "203.0.113.7"
NEIGHBOUR = "198.51.100.9"


async def offer_sdp() -> str:
    """An SDP offer of a real aiortc peer (audio and the oai-events data channel)."""
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    pc.addTransceiver("audio", direction="sendrecv")
    pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


async def sessions(url: str, app: Any, pool_size: int) -> None:
    from gateway.server.app_keys import POOL

    sdp = await offer_sdp()
    statuses: collections.Counter[str] = collections.Counter()
    sockets = []
    async with aiohttp.ClientSession() as http:

        async def post(client: str) -> str:
            headers = {"Content-Type": "application/sdp", "X-Forwarded-For": client}
            async with http.post(f"{url}/v1/realtime/calls", data=sdp, headers=headers) as response:
                body = await response.json() if response.status >= 400 else {}
                return f"{response.status} {body.get('error', {}).get('code', '')}".strip()

        for _ in range(pool_size + 4):
            statuses["offer " + await post(ATTACKER)] += 1
        for _ in range(4):
            try:
                sockets.append(await http.ws_connect(f"{url}/v1/realtime", headers={"X-Forwarded-For": ATTACKER}))
                statuses["websocket 101"] += 1
            except aiohttp.WSServerHandshakeError as exc:
                statuses[f"websocket {exc.status}"] += 1
        held = sum(1 for unit in app[POOL].units if unit.state.value != "idle")
        neighbour = await post(NEIGHBOUR)
        print(f"sessions: one client ({ATTACKER}, through the loopback proxy): {dict(statuses)}")
        print(f"  units held by it: {held} of {pool_size}; the next client ({NEIGHBOUR}): {neighbour}")
        for ws in sockets:
            await ws.close()


async def connections(url: str, count: int) -> None:
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    started = time.monotonic()
    opened = []
    for _ in range(count):
        try:
            opened.append(await asyncio.open_connection(host, port, local_addr=("127.0.0.2", 0)))
        except OSError as exc:
            print(f"  connect failed after {len(opened)}: {exc}")
            break
    opening_s = time.monotonic() - started
    await asyncio.sleep(2.0)
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection(host, port, local_addr=("127.0.0.3", 0))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    healthz = (await asyncio.wait_for(reader.read(), 30)).split(b"\r\n", 1)[0].decode()
    healthz_ms = (time.monotonic() - t0) * 1000
    writer.close()
    still_open, answered = 0, collections.Counter[str]()
    for reader, _writer in opened:
        try:
            data = await asyncio.wait_for(reader.read(4096), 0.01)
        except TimeoutError:
            still_open += 1
            continue
        answered[data.split(b"\r\n", 1)[0].decode() or "closed, no answer"] += 1
    for _, writer in opened:
        writer.close()
    print(f"connections: {len(opened)} opened from 127.0.0.2 in {opening_s:.1f} s; 2 s later the gateway holds")
    print(f"  {still_open} open; answered and closed: {dict(answered)}")
    print(f"  /healthz from 127.0.0.3 meanwhile: {healthz} in {healthz_ms:.0f} ms")


def _commit(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


async def main(pool_size: int, count: int) -> None:
    import gateway
    from gateway.config import GatewayConfig
    from gateway.server.runner import free_port, running_gateway

    known = {f.name for f in dataclasses.fields(GatewayConfig)}
    settings: dict[str, Any] = dict(
        port=free_port(),
        pool_size=pool_size,
        talking_capacity=pool_size,
        connect_timeout_s=120,
        trusted_proxies="127.0.0.1",
        unlimited_sources="127.0.0.1",
    )
    config = GatewayConfig(**{name: value for name, value in settings.items() if name in known})
    checkout = Path(gateway.__file__).resolve().parent.parent
    limited = "max_sessions_per_source" in known
    print(f"checkout {checkout} ({_commit(checkout)}), per-source limits: {'yes' if limited else 'none'}")
    async with running_gateway(config) as (url, app):
        await asyncio.wait_for(sessions(url, app, pool_size), 60)
        await asyncio.wait_for(connections(url, count), 60)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool-size", type=int, default=8)
    parser.add_argument("--connections", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(main(args.pool_size, args.connections))
