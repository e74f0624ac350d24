"""A burst of turns is absorbed by queueing, not by refusing callers: while every slot of the shared
LLM engine runs (replies keep their sequence while their audio plays), a new offer is still
answered, and the engine's queue shows in ``/v1/pool`` and ``/metrics``. (An earlier admission
refused every new call as soon as the engine's slots were all in use.) The engine's real queue is
held busy by turns taken here, with a real offer over HTTP."""

from __future__ import annotations

import contextlib

import aiohttp

from tests.helpers import serve
from tests.hostile.sdp_offers import offers


async def test_a_saturated_engine_queue_does_not_refuse_new_calls_and_shows_its_queue(models, gateway_config):
    queue = models.llm.queue
    offer = offers()["sip_bridge"]
    async with serve(gateway_config(pool_size=2), models) as (url, _app):
        async with aiohttp.ClientSession() as http:
            with contextlib.ExitStack() as held:
                turns = [held.enter_context(queue.turn(lambda: False)) for _ in range(queue.slots)]
                assert all(turns)
                async with http.post(
                    f"{url}/v1/realtime/calls", data=offer, headers={"Content-Type": "application/sdp"}
                ) as response:
                    status, location = response.status, response.headers.get("Location")
                assert status == 201, "a full engine queue is no reason to refuse a caller"
                async with http.get(f"{url}/v1/pool") as response:
                    compute = (await response.json())["compute"]
                assert compute == {"running": queue.slots, "waiting": 0, "slots": queue.slots, "saturated": True}
                async with http.get(f"{url}/metrics") as response:
                    text = await response.text()
                assert f'vg_llm_turns{{state="running"}} {float(queue.slots)}' in text, text
                assert 'vg_calls_total{result="answered"} 1.0' in text
            async with http.delete(f"{url}{location}") as response:
                assert response.status == 200
