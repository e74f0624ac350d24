"""100 connect/disconnect cycles leak no threads, tasks, units or memory."""

from __future__ import annotations

import asyncio
import gc
import threading

import numpy as np

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app import POOL
from tests.helpers import serve, wait_until

CYCLES = 100


def own_threads() -> list[str]:
    """Thread names, less asyncio's default executor (a bounded pool that grows lazily to its size)."""
    return sorted(t.name for t in threading.enumerate() if not t.name.startswith("asyncio_"))


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def cycle(url: str, hangup: bool) -> None:
    client = RealtimeClient(url)
    assert await client.connect() == 201
    if hangup:
        await client.hangup()
    else:
        await client.close()


async def test_connect_disconnect_cycles_leak_nothing(models, gateway_config):
    async with serve(gateway_config(pool_size=2), models) as (url, app):
        pool = app[POOL]
        for i in range(5):  # warm-up: first-use allocations are not leaks
            await cycle(url, hangup=i % 2 == 0)
        assert await wait_until(lambda: all(u.state is UnitState.IDLE for u in pool.units), 10)
        gc.collect()
        threads, tasks, rss = own_threads(), len(asyncio.all_tasks()), rss_kib()

        for i in range(CYCLES):
            await cycle(url, hangup=i % 2 == 0)  # half hang up, half just close the peer connection
        assert await wait_until(lambda: all(u.state is UnitState.IDLE for u in pool.units), 10)
        await asyncio.sleep(0.5)
        gc.collect()
        assert own_threads() == threads
        assert len(asyncio.all_tasks()) <= tasks
        growth = (rss_kib() - rss) / rss
        assert growth < 0.05, f"RSS grew {100 * growth:.1f} %"
        assert sum(u.sessions_served for u in pool.units) == CYCLES + 5
        assert pool.snapshot()["recoveries"] == 0


async def test_a_hung_up_callers_instructions_are_not_read_on(models, gateway_config):
    """The LLM reads a call's instructions ahead of its first turn; a caller who hung up at once
    left that reading running (seconds of every other caller's decode steps on a slow box). The
    unit lets go of it at the drain, so the engine stops reading for nobody."""
    from gateway.models.base import ChatMessage, GenerationOptions
    from gateway.models.llama_cpp.state_cache import common_prefix

    decoder = models.llm.decoder
    instructions = "Know these words: " + " ".join(f"gamma{i} delta{i}" for i in range(130))
    prefix = models.llm.chat.prefix_tokens([ChatMessage("system", instructions)], GenerationOptions())
    assert 600 < len(prefix) <= 1024, len(prefix)  # read ahead (under the warm limit), and seconds of work

    def most_held() -> int:
        want = np.asarray(prefix, dtype=np.intc)
        with decoder._cond:
            return max(common_prefix(np.asarray(s.tokens, dtype=np.intc), want) for s in decoder._seqs)

    def reading_ahead() -> int:
        with decoder._cond:
            return sum(1 for e in decoder._live_pending() if e.warm)

    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect(offer_session={"type": "realtime", "instructions": instructions}) == 201
        await client.hangup()
        assert await wait_until(lambda: app[POOL].units[0].state is UnitState.IDLE, 10)
        assert await wait_until(lambda: reading_ahead() == 0, 5), "nothing is read for a caller who has gone"
        assert most_held() < len(prefix) - 1, "the reading stopped before the end"


async def test_a_read_ahead_is_let_go_when_the_turn_went_otherwise_or_the_call_ends(models, gateway_config):
    """The prompt read ahead at a pause is the unit's to let go: a response to other words (the
    caller went on) or the end of the call stops the reading, so no compute goes on a prompt nobody
    will ask for; a response to exactly those words keeps it."""
    from gateway.models.base import ChatMessage
    from gateway.pool.unit import PipelineUnit

    decoder = models.llm.decoder
    system = ChatMessage(
        "system", "You answer questions about these words: " + " ".join(f"omega{i}" for i in range(60))
    )

    def reading_ahead() -> int:
        with decoder._cond:
            return sum(1 for e in decoder._live_pending() if e.warm)

    # The preemptive reply (on by default) reads its prompt itself: this is the read alone.
    unit = PipelineUnit(0, models, gateway_config(preemptive_reply=False), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_read_ahead", lambda event: None)
        draft = [system, ChatMessage("user", "What is the first word")]
        unit.read_ahead(draft, max_tokens=2, tools=[], tool_choice="none")
        assert await wait_until(lambda: reading_ahead() == 1, 5), "the draft's prompt is being read"
        unit.create_response([system, ChatMessage("user", "What is the first word of the list?")], False, max_tokens=2)
        assert await wait_until(lambda: reading_ahead() == 0, 5), "the other words' read stopped"
        unit.interrupt()

        same = [system, ChatMessage("user", "What is the second word?")]
        unit.read_ahead(same, max_tokens=2, tools=[], tool_choice="none")
        assert await wait_until(lambda: unit.prompt_read.held is not None, 5)
        held = unit.prompt_read.held
        assert held is not None
        warm = held[0]
        assert await wait_until(lambda: warm.done, 60), "read to the end"
        unit.create_response(same, audio=False, max_tokens=2, tool_choice="none")
        assert unit.prompt_read.held is held, "kept for the response that asked for it"
        unit.interrupt()

        late = [system, ChatMessage("user", "What is the fourth word? And the fifth one, and the sixth?")]
        unit.read_ahead(late, max_tokens=2, tools=[], tool_choice="none")
        unit.create_response(late, False, max_tokens=2, tool_choice="none")  # before the read came back
        assert unit.prompt_read.held is None
        await asyncio.sleep(0.5)  # the read comes back from its worker thread, unwanted
        assert unit.prompt_read.held is None, "a read not done is let go: the turn reads its prompt itself"
        assert await wait_until(lambda: reading_ahead() == 0, 5)
        unit.interrupt()

        unit.read_ahead([system, ChatMessage("user", "And the third")], max_tokens=2, tools=[], tool_choice="none")
        assert await wait_until(lambda: reading_ahead() >= 1, 5)
        unit.begin_drain("client_hangup")
        assert await wait_until(lambda: reading_ahead() == 0, 5), "nothing is read for a caller who has gone"
    finally:
        unit.close()
        unit.join(5)


async def test_the_pool_counts_connected_calls_for_the_llm_threads(models, gateway_config):
    """The LLM takes both cores only for a lone call: the pool keeps the count of calls connected
    (claimed, draining or stuck units) where the decoder reads it."""
    from gateway.models.compute.core_use import CORE_USE
    from gateway.pool.pool import UnitPool

    pool = UnitPool(models, gateway_config(pool_size=2, talking_capacity=2))
    try:
        first = pool.claim("rtc_first", lambda event: None)
        assert CORE_USE.calls == 1 and CORE_USE.busy == 0
        pool.claim("rtc_second", lambda event: None)
        assert CORE_USE.calls == 2 and CORE_USE.busy == 1
        first.release("client_hangup")
        assert await wait_until(lambda: CORE_USE.calls == 1, 15), "a drained unit no longer counts"
    finally:
        pool.close()
