"""deploy/nginx.conf in front of two gateways (in-process, instance ids ``gateway-a`` and
``gateway-b``, as docker-compose.yml names them), with Debian's nginx on loopback: a request for a
call of any transport (``rtc_``, ``ws_``, ``sip_`` ids) reaches the process named in the id, in
the path or in ``?call_id=``, every time (round robin would send every other one elsewhere); the
access log shows every kind of id shortened; and a page served through the proxy is same-origin
for the gateway (nginx passes the Host as the browser sent it, port included)."""

from __future__ import annotations

import contextlib
import re

import aiohttp

from gateway.server.runner import free_port
from tests.helpers import serve
from tests.ops.services import start_nginx, wait_healthy

INSTANCES = ("gateway-a", "gateway-b")
HEX = "0123456789abcdef" * 2


async def test_requests_for_a_call_of_any_transport_reach_its_owner(models, gateway_config, tmp_path):
    configs = {instance: gateway_config(instance_id=instance) for instance in INSTANCES}
    ports = {instance: config.port for instance, config in configs.items()}
    async with contextlib.AsyncExitStack() as stack:
        for config in configs.values():
            await stack.enter_async_context(serve(config, models))
        nginx_port = free_port()
        nginx = start_nginx(tmp_path, nginx_port, ports)
        stack.callback(nginx.stop)
        front = f"http://127.0.0.1:{nginx_port}"
        await wait_healthy(nginx, front)

        asked: list[tuple[str, str]] = []  # (call id, owner)
        async with aiohttp.ClientSession() as http:
            for prefix in ("rtc", "ws", "sip"):
                for owner in INSTANCES:
                    call_id = f"{prefix}_{owner}_{HEX}"
                    for method, path, status in (
                        ("DELETE", f"/v1/realtime/calls/{call_id}", 404),
                        ("POST", f"/v1/realtime/calls/{call_id}/hangup", 404),
                        ("POST", f"/v1/realtime/calls/{call_id}/accept", 404),
                        ("GET", f"/v1/realtime?call_id={call_id}", 400),  # no upgrade: the owner says so
                    ):
                        async with http.request(method, f"{front}{path}") as response:
                            assert response.status == status, (method, path, await response.text())
                        asked.append((call_id, owner))

            # The demo page served through the proxy posts from the proxy's origin: the gateway sees
            # the Host the browser sent and takes it as its own (an invalid offer: past the check).
            origin = {"Origin": front, "Content-Type": "application/json"}
            async with http.post(f"{front}/offer", data='{"sdp": "v=0", "type": "offer"}', headers=origin) as response:
                assert response.status == 400, await response.text()
                assert (await response.json())["error"]["code"] == "invalid_offer"

        nginx.stop()  # the access log is complete
        log = (tmp_path / "access.log").read_text()
        lines = [line for line in log.splitlines() if "/v1/realtime" in line]
        assert len(lines) == len(asked), log
        for line, (call_id, owner) in zip(lines, asked, strict=True):
            assert f"upstream=127.0.0.1:{ports[owner]} " in line, (call_id, line)
            shortened = call_id[: call_id.rindex("_") + 9] + "..."
            assert shortened in line and HEX not in line, line
        assert not re.search(r"_[0-9a-f]{32}", log), "nginx logged a full call id"
