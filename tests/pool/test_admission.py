"""Admission by measured load (``gateway.pool.capacity``, ``gateway.pool.load``): the decision from
given measurements, and the measurements the meter makes of given CPU seconds, turns and misses
(a clock of its own: no sleeping, no machine load involved)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.pool.capacity import CPU_TARGET, LLM_TARGET, calls_fit, clears_in_s, load_share, refusal
from gateway.pool.load import TICK_S, WINDOW_S, Load, LoadMeter, prior_call_cost, prior_llm_cost, usable_cores

QUIET = Load(
    live=1,  # one call live, silent: the window rules decide only while a call is live
    talking=0,
    cores=2,
    cpu_cores=0.05,
    box_cores=0.1,
    misses=0,
    missed_s=0.0,
    turns=0,
    first_clause_ms=None,
    reference_ms=None,
    call_cost=0.25,
)


def test_silent_and_listening_callers_cost_nothing_at_admission() -> None:
    four_silent = replace(QUIET, live=4, cpu_cores=0.2, box_cores=0.3)
    assert refusal(four_silent) is None
    seven_live_two_talking = replace(QUIET, live=7, talking=2)
    assert refusal(seven_live_two_talking) is None, "only talking calls are expected to cost"


def test_a_new_call_is_refused_when_one_more_talker_would_not_fit_the_cores() -> None:
    fits = 5  # 6 x 0.25 = 1.5 cores <= 0.85 x 2
    assert refusal(replace(QUIET, live=fits, talking=fits)) is None
    reason = refusal(replace(QUIET, live=6, talking=6))  # 7 x 0.25 = 1.75 > 1.7
    assert reason is not None and "6 talking callers" in reason
    assert calls_fit(QUIET) == 6 == int(CPU_TARGET * 2 / 0.25)
    assert load_share(replace(QUIET, talking=6)) == pytest.approx(6 * 0.25 / 1.7)


def test_missed_deadlines_slow_first_clauses_and_a_saturated_box_refuse() -> None:
    assert "ran out of audio" in (refusal(replace(QUIET, misses=2)) or "")
    assert refusal(replace(QUIET, misses=1)) is None, "one gap is no trend"
    slow = replace(QUIET, turns=6, first_clause_ms=2400.0, reference_ms=1200.0)
    assert "2.0x later" in (refusal(slow) or "")
    assert refusal(replace(slow, first_clause_ms=2000.0)) is None, "1.67x the lone turn: within the bound"
    assert refusal(replace(slow, reference_ms=None)) is None, "no quiet turn measured yet: no ratio"
    assert "busy" in (refusal(replace(QUIET, cpu_cores=1.95)) or "")
    ended = replace(slow, live=0, misses=3, cpu_cores=1.95)
    assert refusal(ended) is None, "no call live: what the window measured were calls that ended"


def test_the_prior_cost_of_a_call_follows_the_decode_speed() -> None:
    assert prior_call_cost(50.0, cores=2) == pytest.approx(60 * 0.05 * 1.6 / 25)
    assert prior_call_cost(900.0, cores=2) == 2.0, "at most the whole box"
    assert prior_call_cost(None, cores=2) == 0.25


class Box:
    """A machine to measure: a clock, this process's CPU seconds, the calls and the misses."""

    def __init__(self) -> None:
        self.now = 100.0
        self.cpu = 0.0
        self.live = 0
        self.talking = 0
        self.misses = (0, 0.0)
        self.llm = 0.0  # the LLM's step thread's compute seconds, as thread time of the busy setting
        self.llm_wall = 0.0  # the same, as wall time
        self.meter = LoadMeter(
            live=lambda: self.live,
            talking=lambda: self.talking,
            misses=lambda: self.misses,
            lone_step_ms=lambda: 50.0,
            llm_busy_s=lambda: self.llm,
            llm_wall_s=lambda: self.llm_wall,
            cores=2,
            clock=lambda: self.now,
            cpu_s=lambda: self.cpu,
            box=lambda: None,
        )

    def run(self, seconds: float, cores: float, llm: float = 0.0, llm_threads: float = 1.0) -> None:
        """``seconds`` pass with this process busy on ``cores`` cores and the LLM's step thread
        computing ``llm`` of the time on ``llm_threads`` times the busy setting's threads (a lone
        call's steps on both cores: 2), sampled every tick."""
        for _ in range(int(seconds / TICK_S)):
            self.now += TICK_S
            self.cpu += cores * TICK_S
            self.llm += llm * llm_threads * TICK_S
            self.llm_wall += llm * TICK_S
            self.meter.tick()


def test_the_meter_learns_what_a_talking_call_costs_and_forgets_old_load() -> None:
    box = Box()
    assert box.meter.load().call_cost == pytest.approx(prior_call_cost(50.0, 2)), "the prior before any call"
    box.live = 4  # four callers, silent: nothing is learned from them
    box.run(20, cores=0.1)
    assert box.meter.load().call_cost == pytest.approx(prior_call_cost(50.0, 2))
    box.talking = 2
    box.run(600, cores=1.0)
    load = box.meter.load()
    assert load.call_cost == pytest.approx((1.0 - 0.02) / 2, rel=0.05), "(CPU - idle) per talking call"
    assert load.cpu_cores == pytest.approx(1.0) and load.box_cores == pytest.approx(1.0), "no /proc/stat: the process"
    box.talking = 0
    box.run(WINDOW_S + 2, cores=0.1)
    assert box.meter.load().cpu_cores == pytest.approx(0.1), "only the last window counts"


def test_the_meter_counts_misses_and_first_clauses_of_the_window() -> None:
    box = Box()
    box.live = box.talking = 2
    box.meter.first_audio(1.0, quiet=True)
    box.meter.first_audio(1.2, quiet=True)
    box.misses = (3, 1.5)
    box.run(5, cores=0.5)
    for seconds in (2.0, 2.2, 2.6):
        box.meter.first_audio(seconds, quiet=False)
    load = box.meter.load()
    assert load.misses == 3 and load.missed_s == 1.5 and load.misses_total == 3
    assert load.turns == 5 and load.first_clause_ms == pytest.approx(2600.0), "p90 of the window's turns"
    assert load.reference_ms == pytest.approx(1100.0), "the median of the quiet turns"
    box.run(WINDOW_S + 2, cores=0.5)
    load = box.meter.load()
    assert load.misses == 0 and load.misses_total == 3 and load.turns == 0 and load.first_clause_ms is None
    assert load.reference_ms == pytest.approx(1100.0), "the lone reference outlives the window"


def _cpu_s_of(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _burn_until(burners: list[subprocess.Popen], cpu_s: float) -> None:
    """Wait (bounded) until every burner has used ``cpu_s`` CPU seconds."""
    deadline = time.monotonic() + 60.0
    while min(_cpu_s_of(p.pid) for p in burners) < cpu_s:
        assert time.monotonic() < deadline, "the burners got no CPU in a minute"
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="the machine's CPU is read from /proc/stat (Linux)")
def test_another_process_burning_every_core_does_not_make_admission_refuse() -> None:
    # Before: "box saturated" read the whole machine's busy cores, so a CI job or another service
    # on the host made this gateway refuse callers it could serve. Now it reads this process's.
    cpus = os.cpu_count() or 1
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cpus)]
    try:
        _burn_until(burners, 0.2)  # running before the meter's first sample
        meter = LoadMeter(live=lambda: 1, talking=lambda: 0, misses=lambda: (0, 0.0), lone_step_ms=lambda: 50.0)
        _burn_until(burners, 1.2)  # this process sleeps meanwhile: it takes no CPU
        load = meter.load()
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert load.box_cores >= 0.95 * cpus, f"the host was busy ({load.box_cores:.2f} of {cpus} CPUs)"
    assert load.cpu_cores < 0.5, "this process was idle"
    assert refusal(load) is None, "another process's CPU is not this gateway's load"
    assert load_share(load) < 0.5


def test_the_process_saturating_its_cores_refuses() -> None:
    reason = refusal(replace(QUIET, cpu_cores=1.95, box_cores=1.95))
    assert reason is not None and "This process is busy" in reason
    assert refusal(replace(QUIET, cpu_cores=0.3, box_cores=2.0)) is None, "the host's other processes"


def test_usable_cores_follow_the_cgroup_quota(tmp_path: Path) -> None:
    quota = tmp_path / "cpu.max"
    quota.write_text("max 100000\n")
    assert usable_cores(quota) == len(os.sched_getaffinity(0))
    quota.write_text("50000 100000\n")
    assert usable_cores(quota) == 1, "half a core: one"
    quota.write_text("150000 100000\n")
    assert usable_cores(quota) == min(2, len(os.sched_getaffinity(0)))
    assert usable_cores(tmp_path / "absent") == len(os.sched_getaffinity(0))


def test_the_meter_learns_the_llm_share_of_a_talking_call_and_admission_reads_it() -> None:
    box = Box()
    assert box.meter.load().llm_cost == pytest.approx(prior_llm_cost(50.0)), "the prior before any call"
    box.live = box.talking = 2
    box.run(600, cores=0.8, llm=0.8)
    load = box.meter.load()
    assert load.llm_share == pytest.approx(0.8) and load.llm_cost == pytest.approx(0.4, rel=0.05)
    assert "of the LLM's time" in (refusal(load) or ""), "3 x 40 % of the LLM's thread is over its target"
    assert refusal(replace(load, live=1, talking=1)) is None, "2 x 40 %: within it"
    assert calls_fit(load) == 2 and load_share(load) == pytest.approx(0.8 / LLM_TARGET, rel=0.05)
    box.live = box.talking = 4  # a saturated LLM: 25 % each is a floor, not what a call costs
    box.run(120, cores=1.2, llm=1.0)
    assert box.meter.load().llm_cost == pytest.approx(0.4, rel=0.05)
    box.talking = 0  # four callers, silent now: every one is admitted, the learned share fades
    box.run(60, cores=0.2)
    load = box.meter.load()
    assert prior_llm_cost(50.0) < load.llm_cost < 0.4 and refusal(load) is None
    assert refusal(replace(load, llm_cost=0.95)) is None, "nobody talks: one more conversation always fits"


def test_the_llm_share_of_a_lone_call_is_the_share_of_the_time_its_thread_computes() -> None:
    """Failed before: ``llm_share`` (``/v1/pool``, ``vg_llm_busy_share``: "the share of the time
    its step thread computes", 1.0: it never rests) read the decoder's ``busy_s``, which counts a
    lone call's steps on both cores twice (thread time of the busy setting, what a call costs beside
    others): a lone caller whose steps took 70 % of the time showed 1.4, and an LLM with room left
    was read as saturated, so the call's cost could only rise. The share is now the wall share;
    the cost a call teaches stays in thread time."""
    box = Box()
    box.live = box.talking = 1
    box.run(300, cores=1.4, llm=0.7, llm_threads=2.0)
    load = box.meter.load()
    assert load.llm_share == pytest.approx(0.7), "the share of the time the step thread computed"
    assert load.llm_cost == pytest.approx(1.4, rel=0.1), "a call's cost: thread time of the busy setting"
    assert 0.0 <= load.llm_share <= 1.0
    box.talking = 2  # two talkers on the busy setting: 60 % of the thread, learned down from 1.4
    box.run(300, cores=1.2, llm=0.6)
    assert box.meter.load().llm_cost == pytest.approx(0.3, rel=0.1), "an LLM with room left teaches the cost down"


def test_the_llm_share_is_never_more_than_the_whole_time() -> None:
    """A step's seconds are counted when it ends: a long read that began before the window's first
    sample adds more than the span it ended in. The share of the time is at most 1.0."""
    box = Box()
    box.live = box.talking = 1
    box.now += TICK_S
    box.llm = box.llm_wall = 1.6  # one 1.6 s step, begun before the meter's first sample
    box.meter.tick()
    assert box.meter.load().llm_share == 1.0


def test_an_idle_box_admits_after_one_caller_saturated_its_cores() -> None:
    """Failed before: one talker on a box busy with it (1.95 of 2 cores for 5 min) taught a cost of
    ~1.9 cores a call, learned only while somebody talks; once the load went away, "0 talking
    callers at 1.89 cores each leave no room for another" refused every caller, for ever."""
    box = Box()
    box.live = box.talking = 1
    box.run(300, cores=1.95)
    assert box.meter.load().call_cost > CPU_TARGET * 2, "what one call cost while it ran"
    assert refusal(box.meter.load()) is not None, "the box is saturated now"
    box.live = box.talking = 0  # the caller hung up
    box.run(WINDOW_S + 2, cores=0.02)
    load = box.meter.load()
    assert refusal(load) is None, (load.call_cost, refusal(load))
    box.run(300, cores=0.02)
    assert box.meter.load().call_cost == pytest.approx(prior_call_cost(50.0, 2), rel=0.05), "back to the prior"


def test_a_busy_phase_does_not_refuse_a_second_talker_minutes_after_it() -> None:
    """Failed before: one caller saturating the LLM's thread taught a share of ~1.0 a call, which
    only rises while the LLM is saturated and stays while nobody talks; minutes later, with one
    caller talking on a quiet LLM (10 % of its thread), the second was refused ("1 talking callers
    at 97% of the LLM's time each") until a minute or more of that call's turns taught it down."""
    box = Box()
    box.live = box.talking = 1
    box.run(300, cores=1.0, llm=1.0)
    assert box.meter.load().llm_cost > LLM_TARGET / 2
    box.talking = 0  # listening, then gone: nobody talks for three minutes
    box.run(60, cores=0.1)
    box.live = 0
    box.run(120, cores=0.02)
    box.live = box.talking = 1  # a new caller talks; the LLM computes 10 % of the time for it
    box.run(5, cores=0.3, llm=0.1)
    load = box.meter.load()
    assert load.llm_cost is not None and 2 * load.llm_cost <= LLM_TARGET
    assert refusal(load) is None, refusal(load)


# Recorded: this project's slow 2-core box decodes one sequence in 137 ms on one thread (7.3 tok/s;
# docs/BENCHMARKS.md, "Many callers talking at once"); there 3 talking conversations were answered
# at 1.84-1.91x the lone median, 2 within 1.5x ("Calls per box"). The faster box of the issue
# logged a lone step of 43 ms (19-22 tok/s).
SLOW_BOX_STEP_MS = 137.0
FAST_BOX_STEP_MS = 43.0


@pytest.mark.parametrize(("step_ms", "talkers_fit"), [(SLOW_BOX_STEP_MS, 2), (FAST_BOX_STEP_MS, 7)])
def test_before_any_call_is_measured_the_lone_decode_step_says_how_many_talk(step_ms: float, talkers_fit: int) -> None:
    load = replace(QUIET, call_cost=prior_call_cost(step_ms, 2), llm_cost=prior_llm_cost(step_ms))
    decisions = [refusal(replace(load, live=n, talking=n)) is None for n in range(8)]
    assert decisions == [n < talkers_fit for n in range(8)], [
        (n, refusal(replace(load, live=n, talking=n))) for n in range(8)
    ]
    assert calls_fit(load) == talkers_fit
    assert refusal(replace(load, live=4, talking=0)) is None, "four silent callers"


def test_a_refusal_says_when_the_window_rules_stop_refusing() -> None:
    box = Box()
    box.live = 1
    box.misses = (2, 0.8)
    box.run(10, cores=0.3)  # two replies ran dry 10 s ago: refused until they leave the 30 s window
    load = box.meter.load()
    assert "ran out of audio" in (refusal(load) or "")
    assert clears_in_s(load) == pytest.approx(WINDOW_S - 10 + TICK_S, abs=TICK_S)
    box.meter.first_audio(1.0, quiet=True)
    for seconds in (2.4, 2.5, 2.6):  # slow answers now: they count 30 s more
        box.meter.first_audio(seconds, quiet=False)
    assert clears_in_s(box.meter.load()) == pytest.approx(WINDOW_S, abs=TICK_S)
    box.run(WINDOW_S + 2, cores=0.3)
    load = box.meter.load()
    assert refusal(load) is None and clears_in_s(load) is None
    assert clears_in_s(replace(QUIET, live=6, talking=6)) is None, "a talker rule: when a talker stops is not known"


def test_the_window_starts_again_once_every_call_has_ended() -> None:
    """Failed before: two replies that ran dry and slow first clauses of calls that then all hung
    up refused each new caller after the first for the rest of the 30 s window with nothing
    running (the load generator's eight callers, right after its six: 1 of 8 admitted, "2 replies
    ran out of audio in the last 30 s")."""
    box = Box()
    box.live = box.talking = 3
    box.meter.first_audio(1.0, quiet=True)
    box.misses = (2, 0.8)
    for _ in range(3):
        box.meter.first_audio(2.6, quiet=False)
    box.run(10, cores=1.2)
    assert refusal(box.meter.load()) is not None, "three callers, replies running dry"
    box.live = box.talking = 0  # they hang up
    box.run(3, cores=0.02)
    box.live = 1  # a new caller, then a second one asks
    load = box.meter.load()
    assert load.misses == 0 and load.first_clause_ms is None and load.cpu_cores < 0.1, load
    assert refusal(load) is None, refusal(load)
    assert load.reference_ms == 1000.0, "the quiet turns' reference stays"
    box.misses = (4, 1.6)  # new misses of the new calls count again
    box.run(2, cores=0.5)
    assert "ran out of audio" in (refusal(box.meter.load()) or "")
