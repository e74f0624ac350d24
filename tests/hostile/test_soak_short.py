"""The soak of ``scripts/soak_calls.py``, short: callers in their own processes killed with SIGKILL
(mid-answer and right after connecting) leave no unit, thread, task or file descriptor behind.
The long run (``scripts/soak_calls.py --cycles N``, RSS figures; a recorded run is in
docs/BENCHMARKS.md) is the script's, not a unit test's."""

from __future__ import annotations

import collections
import importlib.util
import sys
from pathlib import Path

import pytest

from tests.helpers import serve

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak_calls.py"


def load_soak():
    spec = importlib.util.spec_from_file_location("soak_calls", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak_calls"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
async def test_abrupt_drops_leave_nothing_behind(models, gateway_config, tmp_path):
    soak = load_soak()
    config = gateway_config(pool_size=2, media_timeout_s=1.0, max_response_tokens=30)
    question = soak.speech_file(models, "Tell me about the sea.", str(tmp_path))
    async with serve(config, models) as (url, app):
        for drop_at in ("answer", "connected"):  # warm-up: first-use threads and allocations
            assert await soak.one_cycle(url, question, drop_at, 120) == "ok"
            assert await soak.wait_idle(app, 20)
        before = soak.figures(app, models)
        results = collections.Counter()
        for drop_at in ("answer", "connected", "answer", "connected"):
            outcomes = [await soak.one_cycle(url, question, drop_at, 120) for _ in range(2)]
            results.update(outcomes)
            assert await soak.wait_idle(app, 20), drop_at
        after = soak.figures(app, models)
    assert results == {"ok": 8}, results
    # Every unit is idle again (a leaked unit would be one idle fewer)...
    assert after["units idle"] == before["units idle"] == config.pool_size, (before, after)
    # ...and nothing else grew.
    for key in ("recoveries", "threads", "native threads", "tasks", "open fds"):
        assert after[key] <= before[key], (key, before[key], after[key])
