"""Admission by capacity: while the shared LLM engine has no free batch slot, a new offer is refused
at once (503 ``compute_busy`` with ``Retry-After``: behind nginx the next process is tried), and the
compute queue shows in ``/v1/pool`` and ``/metrics``. The engine's real queue is held busy by turns
taken here (as talking callers would), with a real offer over HTTP."""

from __future__ import annotations

import contextlib
import json

import aiohttp

from tests.helpers import serve
from tests.hostile.sdp_offers import offers


async def test_a_saturated_engine_refuses_new_calls_and_shows_its_queue(models, gateway_config):
    queue = models.llm.queue
    offer = offers()["sip_bridge"]
    async with serve(gateway_config(pool_size=2), models) as (url, _app):
        async with aiohttp.ClientSession() as http:

            async def post() -> tuple[int, str, dict]:
                async with http.post(
                    f"{url}/v1/realtime/calls", data=offer, headers={"Content-Type": "application/sdp"}
                ) as response:
                    return response.status, await response.text(), dict(response.headers)

            with contextlib.ExitStack() as held:
                turns = [held.enter_context(queue.turn(lambda: False)) for _ in range(queue.slots)]
                assert all(turns)
                status, body, headers = await post()
                assert status == 503 and json.loads(body)["error"]["code"] == "compute_busy", body
                assert int(headers["Retry-After"]) > 0
                async with http.get(f"{url}/v1/pool") as response:
                    compute = (await response.json())["compute"]
                assert compute == {"running": queue.slots, "waiting": 0, "slots": queue.slots, "saturated": True}
                async with http.get(f"{url}/metrics") as response:
                    text = await response.text()
                assert f'vg_llm_turns{{state="running"}} {float(queue.slots)}' in text, text
                assert 'vg_calls_total{result="compute_busy"} 1.0' in text
            status, _, headers = await post()
            assert status == 201, "a free slot admits again"
            async with http.delete(f"{url}{headers['Location']}") as response:
                assert response.status == 200
