"""Scale-out behind nginx, with the repository's deploy/nginx.conf: two gateway processes (pool of 1
each) on loopback. Two calls succeed on different processes (a full process's 503 makes nginx try
the next), a third gets 503, and each hang-up, routed by the instance in its call id, reaches the
process that owns the call. An ephemeral ``ek_`` key minted through nginx opens a call through nginx
(it names the process that minted it, and nginx routes by it: that process alone holds the key).
Two processes on ``--port 0`` name their call ids by the ports they serve."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import aiohttp
import pytest

from gateway.client import RealtimeClient
from gateway.server.runner import free_port
from tests.helpers import wait_until
from tests.ops.services import FAST_MODELS, FIXED_CAPACITY, ROOT, Service, start_gateway, start_nginx, wait_healthy
from tests.transports.websocket.ws_client import EventClient

pytestmark = pytest.mark.slow

INSTANCES = ("gateway-a", "gateway-b")  # the instance ids deploy/nginx.conf routes by
API_KEY = "sk-scale-out-test"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def instance_of(call_id: str) -> str:
    """``rtc_<instance>_<hex>`` -> ``<instance>``."""
    assert call_id.startswith("rtc_"), call_id
    return call_id[len("rtc_") :].rsplit("_", 1)[0]


async def pool_of(http: aiohttp.ClientSession, url: str) -> dict:
    async with http.get(f"{url}/v1/pool") as response:
        assert response.status == 200
        return await response.json()


async def test_two_calls_on_two_processes_a_third_refused_hang_ups_reach_their_owner(tmp_path):
    services = []
    clients: list[RealtimeClient] = []
    try:
        direct: dict[str, str] = {}
        ports: dict[str, int] = {}
        for instance in INSTANCES:
            port = free_port()
            gateway, url = start_gateway(
                tmp_path, "--pool-size", "1", "--instance-id", instance, "--api-key", API_KEY, name=instance, port=port
            )
            services.append(gateway)
            direct[instance], ports[instance] = url, port
        nginx_port = free_port()
        nginx = start_nginx(tmp_path, nginx_port, ports)
        services.append(nginx)
        front = f"http://127.0.0.1:{nginx_port}"
        await asyncio.gather(*(wait_healthy(service, direct[service.name]) for service in services[:2]))
        await wait_healthy(nginx, front)  # nginx answers, and passes /healthz to a gateway

        for _ in range(2):
            client = RealtimeClient(front)
            clients.append(client)
            assert await client.connect(headers=AUTH) == 201, client.error_body
        owners = [instance_of(client.call_id or "") for client in clients]
        assert sorted(owners) == sorted(INSTANCES), owners

        third = RealtimeClient(front)
        clients.append(third)
        assert await third.connect(headers=AUTH) == 503
        assert '"pool_full"' in (third.error_body or ""), third.error_body
        assert third.retry_after

        async with aiohttp.ClientSession(headers=AUTH) as http:
            for owner in owners:
                pool = await pool_of(http, direct[owner])
                assert pool["instance"] == owner and pool["in_use"] == 1, pool
                assert pool["units"][0]["call_id"].startswith(f"rtc_{owner}_"), pool
            # Each hang-up goes through nginx; only the owner knows the call (another process would 404).
            first, second = clients[0], clients[1]
            async with http.delete(f"{front}/v1/realtime/calls/{first.call_id}") as response:
                assert response.status == 200, await response.text()
            async with http.post(f"{front}/v1/realtime/calls/{second.call_id}/hangup") as response:
                assert response.status == 200, await response.text()
            for owner in owners:
                for _ in range(100):
                    pool = await pool_of(http, direct[owner])
                    if pool["totals"]["idle"] == 1:
                        break
                    await asyncio.sleep(0.1)
                unit = pool["units"][0]
                assert unit["state"] == "idle" and unit["sessions_served"] == 1, pool
                assert unit["close_reason"] == "client_hangup", pool
            # Client secrets: minted through nginx (round robin: each on some process), used through
            # nginx by a browser. Each must reach the process that holds it, never the other (401).
            for _ in range(2 * len(INSTANCES)):
                async with http.post(f"{front}/v1/realtime/client_secrets", json={}) as response:
                    assert response.status == 200, await response.text()
                    key = (await response.json())["value"]
                keyed = RealtimeClient(front)
                clients.append(keyed)
                assert await keyed.connect(headers={"Authorization": f"Bearer {key}"}) == 201, keyed.error_body
                async with http.delete(f"{front}/v1/realtime/calls/{keyed.call_id}") as response:
                    assert response.status == 200, await response.text()
                await keyed.close()
                for owner in INSTANCES:
                    for _ in range(100):
                        if (await pool_of(http, direct[owner]))["totals"]["idle"] == 1:
                            break
                        await asyncio.sleep(0.1)
        access = (tmp_path / "access.log").read_text()
        assert first.call_id and first.call_id not in access, "nginx logged a full call id"
        refused = [line for line in access.splitlines() if '"POST /v1/realtime/calls' in line and '" 503 ' in line]
        assert refused and "upstream_status=503, 503" in refused[-1], access  # both processes were asked
    finally:
        for client in clients:
            await client.close()
        for service in services:
            service.stop()


async def test_two_processes_on_port_0_name_their_call_ids_by_the_ports_they_serve(tmp_path):
    """Two ``voice-gateway serve --port 0`` on one host, no ``--instance-id``: each named its
    instance ``<host>-0`` (from the configured port), so their call ids shared an instance and a
    proxy routing by it could not tell them apart. Each now prints its bound port and names its
    instance by it; a WebSocket call to each gets a call id of its own process's instance."""
    services = []
    try:
        for name in ("port0-a", "port0-b"):
            argv = [sys.executable, "-m", "gateway", "serve", "--host", "127.0.0.1", "--port", "0", *FAST_MODELS]
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            services.append(Service(name, [*argv, *FIXED_CAPACITY], tmp_path / f"{name}.log", env=env, cwd=ROOT))
        serving: dict[str, tuple[int, str]] = {}

        def all_serving() -> bool:
            for service in services:
                found = re.search(r"serving on http://127\.0\.0\.1:(\d+) \(.*instance ([\w-]+)\)", service.log)
                if found:
                    serving[service.name] = (int(found.group(1)), found.group(2))
            return len(serving) == len(services)

        assert await wait_until(all_serving, 90), [s.log[-2000:] for s in services]
        instances = {instance for _, instance in serving.values()}
        assert len(instances) == 2, serving
        async with aiohttp.ClientSession() as http:
            for port, instance in serving.values():
                assert instance.endswith(f"-{port}"), (instance, port)
                url = f"http://127.0.0.1:{port}"
                async with EventClient(url) as client:
                    await client.wait_for("session.created", timeout=10)
                    units = (await pool_of(http, url))["units"]
                    calls = [unit["call_id"] for unit in units if unit.get("call_id")]
                    assert calls and calls[0].startswith(f"ws_{instance}_"), (calls, instance)
    finally:
        for service in services:
            service.stop()
