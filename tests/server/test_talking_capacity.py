"""Admission with a set capacity (``--talking-capacity N``): once N calls are live a new WebRTC
offer, WebSocket session or SIP INVITE is refused at once (503 ``compute_busy`` with
``Retry-After``); a call that hangs up makes room. And by measured load (the default): the load,
the estimate and the decode steps it starts from show in ``/v1/pool`` and ``/metrics``. Real offers
over HTTP and real SIP over UDP on loopback; the live calls are offers nobody connects (they stay
live for ``connect_timeout_s``)."""

from __future__ import annotations

import json

import aiohttp

from gateway.server.runner import free_port
from tests.helpers import serve
from tests.hostile.sdp_offers import offers
from tests.transports.sip import sip_samples
from tests.transports.sip.sip_socket import SipSocket


async def post_offer(http: aiohttp.ClientSession, url: str) -> tuple[int, dict, dict]:
    offer = offers()["sip_bridge"]
    async with http.post(f"{url}/v1/realtime/calls", data=offer, headers={"Content-Type": "application/sdp"}) as r:
        body = await r.text()
        return r.status, (json.loads(body) if r.status != 201 else {}), dict(r.headers)


async def test_calls_beyond_the_talking_capacity_get_compute_busy_until_one_hangs_up(models, gateway_config):
    config = gateway_config(pool_size=3, talking_capacity=2, sip_port=free_port(), sip_host="127.0.0.1")
    async with serve(config, models) as (url, _app):
        async with aiohttp.ClientSession() as http:
            first, second = await post_offer(http, url), await post_offer(http, url)
            assert first[0] == 201 and second[0] == 201

            status, body, headers = await post_offer(http, url)
            assert status == 503 and body["error"]["code"] == "compute_busy", body
            assert int(headers["Retry-After"]) == config.retry_after_s
            async with http.get(
                f"{url}/v1/realtime",
                headers={
                    "Upgrade": "websocket",
                    "Connection": "Upgrade",
                    "Sec-WebSocket-Version": "13",
                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                },
            ) as r:
                assert r.status == 503 and (await r.json())["error"]["code"] == "compute_busy"
            async with SipSocket(config.sip_port) as peer:
                peer.send(sip_samples.invite(config.sip_port, caller_port=peer.port))
                busy = await peer.response(503)
                assert busy.get("Retry-After") == str(config.retry_after_s)
                assert "compute_busy" in (busy.get("Warning") or "")

            async with http.get(f"{url}/v1/pool") as response:
                pool = await response.json()
            assert pool["capacity"]["live"] == 2 and pool["capacity"]["limit"] == 2
            assert pool["capacity"]["talkers"] == 0, "nobody has said a word"
            assert pool["capacity"]["source"] == "setting" and pool["capacity"]["busy"] is True
            assert pool["totals"]["idle"] == 1, "a unit is free: compute, not the pool, refused"
            async with http.get(f"{url}/metrics") as response:
                text = await response.text()
            assert 'vg_talking_capacity{source="setting"} 2.0' in text, text
            assert "vg_live_calls 2.0" in text and "vg_talkers 0.0" in text
            assert 'vg_calls_total{result="compute_busy"} 3.0' in text  # offer, WebSocket, INVITE

            async with http.delete(f"{url}{first[2]['Location']}") as response:
                assert response.status == 200
            third = await post_offer(http, url)
            assert third[0] == 201, "a hang-up makes room for a new talker"
            for call in (second, third):
                async with http.delete(f"{url}{call[2]['Location']}") as response:
                    assert response.status == 200


async def test_the_measured_load_and_estimate_show_in_pool_and_metrics(models, gateway_config):
    config = gateway_config(pool_size=2, talking_capacity=0)
    async with serve(config, models) as (url, _app):
        async with aiohttp.ClientSession() as http:
            status, _, headers = await post_offer(http, url)
            assert status == 201 or headers.get("Retry-After"), "admitted, or refused by this busy machine's load"
            async with http.get(f"{url}/v1/pool") as response:
                capacity = (await response.json())["capacity"]
            async with http.get(f"{url}/metrics") as response:
                text = await response.text()
            if status == 201:
                async with http.delete(f"{url}{headers['Location']}") as response:
                    assert response.status == 200
    sequences = models.llm.decoder.sequences
    assert capacity["source"] == "measured" and capacity["limit"] == capacity["calls_fit"] >= 1, capacity
    assert capacity["talkers"] == 0 and capacity["cores"] >= 1 and capacity["call_cost_cores"] > 0, capacity
    assert capacity["live"] == (1 if status == 201 else 0), capacity
    assert capacity["busy"] is (capacity["reason"] is not None), capacity
    assert {1, min(2, sequences), sequences} <= {int(size) for size in capacity["step_ms"]}, "the warm-up's probe"
    assert f'vg_talking_capacity{{source="measured"}} {float(capacity["limit"])}' in text
    for name in ("vg_load ", "vg_calls_fit ", "vg_call_cost_cores ", 'vg_cpu_cores{scope="box"}'):
        assert name in text, name
    assert "vg_playout_underruns_total 0.0" in text and 'vg_decode_step_ms{size="1"}' in text
