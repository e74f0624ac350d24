"""Soak: connect / abrupt-drop cycles against a gateway, and what each leaves behind.

Each cycle starts a caller in its own process (``tests/transports/webrtc/caller_process.py``'s way: aiortc,
audio + ``oai-events``), lets it connect (``--drop-at connected``) or ask a spoken question and
hear the answer start (``--drop-at answer``, the default), then kills it with SIGKILL: no hang-up,
no DTLS close, no ICE goodbye. The gateway must notice (``media_timeout_s``), drain the unit and
give back everything the call held. Run in-process with the real models:

    .venv/bin/python scripts/soak_calls.py --cycles 200

It prints, after ``--warm-up`` cycles and after the last one (all units idle again, 1 s to
settle): units by state, pool recoveries, the process's Python threads (by name) and native threads
(of the model runtimes: OS threads less Python ones), asyncio tasks, RSS (MB), the LLM's saved KV
states (a cache bounded by ``llm_state_cache_mb``) and open file descriptors, then the growth of
each and a verdict (exit status 1 if a unit, thread or task leaked or RSS grew by 5 % or more).
Threads of asyncio's default executor (``asyncio_N``) are a bounded pool that grows to its size
lazily and are counted apart. ``VG_*`` variables configure the gateway as for ``serve``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.config import GatewayConfig  # noqa: E402
from gateway.media.resample import Resampler  # noqa: E402
from gateway.models.base import ModelSet  # noqa: E402
from gateway.pool.unit import UnitState  # noqa: E402
from gateway.server.app_keys import POOL  # noqa: E402
from gateway.server.runner import free_port, running_gateway  # noqa: E402

CALLER = """
import asyncio, sys
import numpy as np
from gateway.client import RealtimeClient

async def main(url, speech_file, drop_at):
    client = RealtimeClient(url)
    status = await client.connect()
    print(f"STATUS {status}", flush=True)
    if status != 201:
        return
    if drop_at == "answer":
        client.say(np.load(speech_file))
        await client.wait_for("output_audio_buffer.started", timeout=120)
    print("READY", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
"""


def figures(app: object, models: ModelSet) -> dict[str, object]:
    """What the gateway process holds now."""
    gc.collect()
    pool = app[POOL]  # type: ignore[index]
    threads = [t.name for t in threading.enumerate()]
    executor = [name for name in threads if name.startswith("asyncio_")]
    own = [re.sub(r"\d+", "N", name) for name in threads if not name.startswith("asyncio_")]
    with open("/proc/self/status") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    states = collections.Counter(unit.state.value for unit in pool.units)
    return {
        "units idle": states.get("idle", 0),
        "units active": states.get("active", 0),
        "units draining": states.get("draining", 0),
        "units stuck": states.get("stuck", 0),
        "recoveries": pool.snapshot()["recoveries"],
        "threads": len(own),
        "executor threads": len(executor),
        "native threads": len(os.listdir("/proc/self/task")) - len(threads),
        "tasks": len(asyncio.all_tasks()),
        "RSS MB": round(rss_kib / 1024, 1),
        "open fds": len(os.listdir("/proc/self/fd")),
        "thread names": collections.Counter(own),
        "LLM state cache MB": round(getattr(getattr(models.llm, "state_cache", None), "size_bytes", 0) / 2**20, 1),
    }


async def one_cycle(url: str, speech_file: str, drop_at: str, timeout_s: float) -> str:
    """One caller, killed once ready; returns 'ok', 'refused' or 'failed: ...'."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CALLER,
        url,
        speech_file,
        drop_at,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert child.stdout is not None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            line = (await asyncio.wait_for(child.stdout.readline(), max(0.1, deadline - time.monotonic()))).decode()
            if not line:
                return "failed: caller ended early"
            if line.startswith("STATUS") and line.split()[1] != "201":
                return "refused"
            if line.startswith("READY"):
                return "ok"
    except TimeoutError:
        return "failed: timeout"
    finally:
        if child.returncode is None:
            child.send_signal(signal.SIGKILL)  # abrupt: no hang-up, no DTLS close
        await child.wait()


async def wait_idle(app: object, timeout_s: float) -> bool:
    pool = app[POOL]  # type: ignore[index]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(unit.state is UnitState.IDLE for unit in pool.units):
            return True
        await asyncio.sleep(0.1)
    return False


def speech_file(models: ModelSet, text: str, folder: str) -> str:
    audio = np.concatenate(list(models.tts.synthesize(text)))
    resampler = Resampler(48000)
    samples = np.concatenate([resampler.resample_array(audio, models.tts.sample_rate), resampler.flush()])
    path = os.path.join(folder, "question.npy")
    np.save(path, samples)
    return path


def report(before: dict[str, object], after: dict[str, object], cycles: int, results: collections.Counter) -> bool:
    """Print the table; True when nothing leaked."""
    print(f"\n{cycles} cycles: {dict(results)}")
    print(f"{'':<18}{'before':>10}{'after':>10}{'growth':>10}")
    for key in (
        "units idle",
        "units active",
        "units draining",
        "units stuck",
        "recoveries",
        "threads",
        "executor threads",
        "native threads",
        "tasks",
        "RSS MB",
        "LLM state cache MB",
        "open fds",
    ):
        b, a = before[key], after[key]
        growth = f"{100 * (a - b) / b:+.1f} %" if key == "RSS MB" else f"{a - b:+g}"  # type: ignore[operator]
        print(f"{key:<18}{b!s:>10}{a!s:>10}{growth:>10}")
    extra = after["thread names"] - before["thread names"]  # type: ignore[operator]
    if extra:
        print("threads left behind:", dict(extra))
    rss_growth = (after["RSS MB"] - before["RSS MB"]) / before["RSS MB"]  # type: ignore[operator]
    ok = (
        after["units idle"] == before["units idle"]
        and after["threads"] <= before["threads"]
        and after["native threads"] <= before["native threads"]
        and after["tasks"] <= before["tasks"]
        and after["recoveries"] == before["recoveries"]
        and rss_growth < 0.05
        and not results.get("failed")
    )
    print("verdict:", "flat" if ok else "LEAK")
    return ok


async def soak(args: argparse.Namespace) -> bool:
    from gateway.models.loader import load_models

    # VG_* variables apply (e.g. VG_LLM_STATE_CACHE_MB=0), under the soak's own settings.
    config = GatewayConfig.from_env(
        port=free_port(),
        pool_size=args.pool_size,
        media_timeout_s=args.media_timeout_s,
        max_response_tokens=args.max_response_tokens,
        log_level="WARNING",
    )
    models = load_models(config)
    with tempfile.TemporaryDirectory() as folder:
        question = speech_file(models, args.question, folder)
        async with running_gateway(config, models) as (url, app):
            for _ in range(args.warm_up):  # first-use allocations are not leaks
                await one_cycle(url, question, args.drop_at, 120)
                await wait_idle(app, 60)
            await asyncio.sleep(1)
            before = figures(app, models)
            results: collections.Counter[str] = collections.Counter()
            started = time.monotonic()
            for done in range(0, args.cycles, args.pool_size):
                batch = min(args.pool_size, args.cycles - done)
                outcomes = await asyncio.gather(*(one_cycle(url, question, args.drop_at, 120) for _ in range(batch)))
                results.update(outcome.split(":")[0] for outcome in outcomes)
                if not await wait_idle(app, args.media_timeout_s + config.drain_timeout_s + 10):
                    results["not idle"] += 1
                if args.verbose:
                    now = figures(app, models)
                    print(
                        f"{done + batch:4d} cycles, {time.monotonic() - started:6.0f} s, threads {now['threads']}, "
                        f"native {now['native threads']}, RSS {now['RSS MB']} MB",
                        flush=True,
                    )
            await asyncio.sleep(1)
            after = figures(app, models)
    return report(before, after, args.cycles, results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--pool-size", type=int, default=2, help="units, and callers dropped at once")
    parser.add_argument("--drop-at", choices=("connected", "answer"), default="answer")
    parser.add_argument("--media-timeout-s", type=float, default=1.0, help="how soon the gateway notices the drop")
    parser.add_argument("--max-response-tokens", type=int, default=40)
    parser.add_argument("--question", default="Tell me a story about a dragon.")
    parser.add_argument(
        "--warm-up",
        type=int,
        default=30,
        help="cycles before the first figures: the allocator's arenas and the LLM's bounded KV-state "
        "cache (llm_state_cache_mb) fill in the first ~20-30 calls; that is not a leak",
    )
    parser.add_argument("--verbose", action="store_true")
    ok = asyncio.run(soak(parser.parse_args()))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
