"""``voice-gateway loadtest``: the phases of a load run and the gateway process it may start.

A run is a lone-caller baseline (one caller at a time holding the conversations of the first
callers, until every question was asked once), then one phase per number of callers: N callers
start ``stagger_s`` apart (the ramp-up), each holds a ``turns``-question conversation over its
own WebRTC call, and the phase ends when the last one hangs up. Before each phase the pool must be
idle and the gateway admitting again (the load of the previous phase out of its window). Without
``--url`` the gateway is started here as a child process (``python -m gateway serve`` on a free
loopback port, pool size the largest N unless the gateway flags after ``--`` say
otherwise) and stopped at the end; its CPU is then measured per phase. Loopback or any URL; every
wait is bounded (a turn 90 s, a phase ``phase_timeout_s``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gateway.loadgen.caller import CallResult, converse
from gateway.loadgen.flags import api_key
from gateway.loadgen.plot import svg_plot
from gateway.loadgen.report import (
    Phase,
    breakdown_table,
    caller_table,
    counters_line,
    load_line,
    mixup_line,
    refusal_lines,
    summary_table,
    turn_table,
)
from gateway.loadgen.speech import Question, conversation, load_questions
from gateway.loadgen.turns import wait_pool_idle
from gateway.loadgen.watch import PoolWatch, counters, decode_tok_s, get_json, reach

START_TIMEOUT_S = 600.0  # models load before the gateway listens (a minute or two on a slow box)
DRAIN_WAIT_S = 10.0  # the longest a phase waits for its units to drain before reading its counters
SILENT_HOLD_S = 5.0  # silent callers stay this long together after the last one connected
SETTLE_S = 45.0  # before a phase, wait up to this long for the gateway to admit again, s


@dataclass
class Plan:
    """What a run does: ``callers`` (N of each loaded phase), ``turns`` questions per caller,
    ``think_s`` of thought after each answer, starts ``stagger_s`` apart, the lone ``baseline``
    first, then ``silent`` callers who say nothing (how many are admitted); a phase is abandoned
    after ``phase_timeout_s``; ``transport``: ``webrtc`` or ``websocket``."""

    questions: list[Question]
    callers: list[int]
    turns: int = 3
    think_s: float = 3.0
    stagger_s: float = 1.3
    baseline: bool = True
    silent: int = 0
    phase_timeout_s: float = 900.0
    headers: Optional[dict[str, str]] = None
    transport: str = "webrtc"


class GatewayProcess:
    """A gateway child process on loopback: ``command`` (argv) + ``--host 127.0.0.1 --port P``."""

    def __init__(self, command: list[str], log_path: Path) -> None:
        self.command = command
        self.log_path = log_path
        self.process: Optional[asyncio.subprocess.Process] = None

    def cpu_s(self) -> Optional[float]:
        """User + system CPU seconds of the process so far (Linux /proc); None elsewhere."""
        if self.process is None:
            return None
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @contextlib.asynccontextmanager
    async def running(self, url: str) -> AsyncIterator[None]:
        """The gateway started and ready at ``url`` for the ``with`` block, stopped after it.
        RuntimeError when its log cannot be written, its program not run, or it exits or is not
        ready in :data:`START_TIMEOUT_S`."""
        try:
            log = self.log_path.open("wb")
        except OSError as exc:
            raise RuntimeError(f"cannot write the gateway's log {self.log_path} (--gateway-log): {exc}") from None
        with log:
            try:
                self.process = await asyncio.create_subprocess_exec(*self.command, stdout=log, stderr=subprocess.STDOUT)
            except OSError as exc:
                raise RuntimeError(f"cannot start the gateway (--gateway-command): {exc}") from None
            try:
                await self._wait_ready(url)
                yield
            finally:
                await self._stop()

    async def _wait_ready(self, url: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.returncode is not None:
                raise RuntimeError(f"the gateway exited ({self.process.returncode}); see {self.log_path}")
            if (await get_json(url, "/healthz")).get("status") == "ok":
                return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"the gateway did not become ready in {START_TIMEOUT_S:.0f} s; see {self.log_path}")

    async def _stop(self) -> None:
        """SIGTERM (the gateway drains its calls), then SIGKILL after 30 s."""
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


async def run_phase(
    url: str,
    plan: Plan,
    callers: int,
    gateway: Optional[GatewayProcess],
    alone: bool = False,
    silent: bool = False,
) -> Phase:
    """One phase: ``callers`` conversations started ``stagger_s`` apart (``alone``: the baseline,
    the same conversations one after another; ``silent``: callers who say nothing), with
    ``/v1/pool`` watched and the gateway's counters (and CPU, for a child process) read around it:
    the "after" counters once its units have drained (at most :data:`DRAIN_WAIT_S`: a hang-up's
    discard of a preemptive reply lands while its unit drains, after the caller is done)."""
    await wait_pool_idle(url, timeout=60.0, headers=plan.headers)
    await wait_admitting(url, plan.headers)
    before = await counters(url, plan.headers)
    cpu_before = gateway.cpu_s() if gateway is not None else None
    watch = PoolWatch(url, headers=plan.headers)
    watch.start()
    t0 = time.monotonic()

    async def call(index: int, delay_s: float) -> CallResult:
        await asyncio.sleep(delay_s)
        if silent:  # connected together, for SILENT_HOLD_S after the last one came
            hold = (callers - index) * plan.stagger_s + SILENT_HOLD_S
            return await converse(
                url, index, [], 0.0, t0, headers=plan.headers, silent_s=hold, transport=plan.transport
            )
        questions = conversation(plan.questions, index, plan.turns)
        texts = {q.name: q.text for q in plan.questions if q.text}
        return await converse(
            url, index, questions, plan.think_s, t0, headers=plan.headers, texts=texts, transport=plan.transport
        )

    async def one_by_one() -> list[CallResult]:
        calls = []
        for index in range(callers):
            calls.append(await call(index, 0.0))
            await wait_pool_idle(url, timeout=60.0, headers=plan.headers)
        return calls

    try:
        work = one_by_one() if alone else asyncio.gather(*(call(i, i * plan.stagger_s) for i in range(callers)))
        calls = await asyncio.wait_for(work, plan.phase_timeout_s)
    finally:
        await watch.stop()
    wall = time.monotonic() - t0
    cpu_after = gateway.cpu_s() if gateway is not None else None
    if not await wait_pool_idle(url, timeout=DRAIN_WAIT_S, headers=plan.headers, required=False):
        print(f"(units still in use {DRAIN_WAIT_S:.0f} s after the calls ended: counters read anyway)", flush=True)
    after = await counters(url, plan.headers)
    phase = Phase(callers, alone, list(calls), wall, watch=watch, silent=silent)
    phase.counters = {name: after[name] - before.get(name, 0.0) for name in after}
    if cpu_before is not None and cpu_after is not None:
        phase.cpu_cores = (cpu_after - cpu_before) / wall
    return phase


async def wait_admitting(url: str, headers: Optional[dict[str, str]], timeout: float = SETTLE_S) -> None:
    """Wait until ``/v1/pool`` says new calls are admitted (``capacity.busy`` false: the load a
    previous phase left in the gateway's 30 s window has passed), at most ``timeout`` s; the phase
    then starts anyway (its refusals are results), and the wait is printed."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        capacity = (await get_json(url, "/v1/pool", headers)).get("capacity") or {}
        if not capacity.get("busy"):
            break
        await asyncio.sleep(1.0)
    else:
        print(f"(the gateway still refuses new calls after {timeout:.0f} s: {capacity.get('reason')})", flush=True)
    waited = time.monotonic() - started
    if waited >= 1.0:
        print(f"(waited {waited:.0f} s for the gateway's load window to admit again)", flush=True)


async def run(url: str, plan: Plan, gateway: Optional[GatewayProcess] = None) -> list[Phase]:
    """The lone baseline (when ``plan.baseline``), then a phase per ``plan.callers``."""
    phases = []
    if plan.baseline:
        lone_calls = math.ceil(len(plan.questions) / plan.turns)
        phases.append(await run_phase(url, plan, lone_calls, gateway, alone=True))
        print_phase(phases[-1], phases[0])
    if plan.silent:
        phases.append(await run_phase(url, plan, plan.silent, gateway, silent=True))
        print_phase(phases[-1], None)
    for n in plan.callers:
        phases.append(await run_phase(url, plan, n, gateway))
        print_phase(phases[-1], phases[0] if plan.baseline else None)
    return phases


def print_phase(phase: Phase, lone: Optional[Phase]) -> None:
    """The phase's per-turn and per-caller tables, its counters and load, as they finish."""
    print(f"\n### {phase.name}: {len(phase.calls)} calls in {phase.wall_s:.0f} s\n", flush=True)
    print(turn_table(phase, lone if lone is not phase else None))
    print()
    print(caller_table(phase))
    for line in refusal_lines(phase):
        print(line)
    print(f"\n{counters_line(phase)}\n{load_line(phase)}", flush=True)
    if not phase.silent:
        print(mixup_line(phase), flush=True)


def machine_line(pool: dict[str, Any]) -> str:
    """The box: CPUs, load, and the gateway's decode speed and step times (``/v1/pool``)."""
    speed = decode_tok_s(pool)
    capacity = pool.get("capacity") or {}
    steps = ", ".join(f"{size}: {ms:.0f}" for size, ms in (capacity.get("step_ms") or {}).items())
    decode = f"decode {speed:.1f} tok/s alone (busy-thread setting)" if speed else "decode speed n/a"
    return (
        f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; gateway LLM {decode}; "
        f"decode step ms by batch size {{{steps or 'n/a'}}}; pool size {pool.get('size', 'n/a')}"
    )


def caller_counts(text: str) -> list[int]:
    """``--callers`` (``"6"``, ``"2,4,6,8"``) as the phases' numbers of callers; ValueError naming
    the flag unless each is a whole number of at least 1."""
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ValueError(f"--callers {text!r}: give callers at once per phase, 1 or more each (6, or 2,4,6,8)")
    return counts


def check_numbers(args: argparse.Namespace) -> None:
    """ValueError naming the flag for ``--turns`` below 1, a negative ``--think-s``, ``--stagger-s``
    or ``--silent``, or a ``--url`` that is no ``http(s)://host[:port]``."""
    if args.turns < 1:
        raise ValueError(f"--turns {args.turns}: each caller asks 1 question or more")
    for flag, value in (("--think-s", args.think_s), ("--stagger-s", args.stagger_s), ("--silent", args.silent)):
        if value < 0:
            raise ValueError(f"{flag} {value:g}: use 0 or more")
    if args.url is not None:
        parts = urllib.parse.urlsplit(args.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--url {args.url!r}: give the gateway's http(s)://host:port")


def main(args: argparse.Namespace) -> int:
    """Run ``voice-gateway loadtest``; 0 when every phase ran (refusals and misses are results), 1
    when the gateway could not be started or reached or refused the key, 2 for bad input (a
    number out of range, a URL that is none, no recordings): each said in one line on stderr."""
    try:
        callers = caller_counts(args.callers)
        check_numbers(args)
        questions = load_questions(args.speech)
    except ValueError as exc:
        print(f"voice-gateway loadtest: {exc}", file=sys.stderr)
        return 2
    key = api_key(args)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    plan = Plan(
        questions,
        callers,
        args.turns,
        args.think_s,
        args.stagger_s,
        not args.no_baseline,
        args.silent,
        headers=headers,
        transport=args.transport,
    )
    try:
        return asyncio.run(_main(args, plan))
    except (RuntimeError, PermissionError) as exc:  # not started, not reached, the key refused
        print(f"voice-gateway loadtest: {exc}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace, plan: Plan) -> int:
    extra = [a for a in args.gateway_args if a != "--"]
    async with contextlib.AsyncExitStack() as stack:
        gateway = None
        url = args.url
        if url is None:
            from gateway.server.runner import free_port

            port = free_port()
            url = f"http://127.0.0.1:{port}"
            command = [*shlex.split(args.gateway_command), "--host", "127.0.0.1", "--port", str(port)]
            if "--pool-size" not in extra:
                command += ["--pool-size", str(max(plan.callers))]
            gateway = GatewayProcess([*command, *extra], args.gateway_log)
            print(f"starting the gateway: {shlex.join(gateway.command)} (log {args.gateway_log})")
            await stack.enter_async_context(gateway.running(url))
        pool = await reach(url, plan.headers)
        print(machine_line(pool))
        names = ", ".join(q.name for q in plan.questions)
        print(
            f"{len(plan.questions)} recordings ({names}); {plan.turns} turns per caller, {plan.think_s:g} s of "
            f"thought after each answer, starts {plan.stagger_s:g} s apart, over {plan.transport}",
            flush=True,
        )
        phases = await run(url, plan, gateway)
    lone = phases[0] if plan.baseline else None
    print("\n## Summary\n")
    print(summary_table(phases, lone))
    print("\n## Where a turn's time went (medians, ms)\n")
    print(breakdown_table(phases))
    if args.json:
        from gateway.loadgen.report import as_json

        args.json.write_text(json.dumps(as_json(phases, {"pool": pool, "line": machine_line(pool)}), indent=1))
    if args.plot:
        speed = decode_tok_s(pool)
        title = f"turn voice-to-voice vs callers ({os.cpu_count()} CPUs" + (
            f", decode {speed:.0f} tok/s)" if speed else ")"
        )
        args.plot.write_text(svg_plot(phases, lone, title))
    return 0
