"""The load generator's output: per-phase summary, per-turn and per-caller tables (Markdown), and a
plot of turn latency against callers (an SVG written here, no plotting library)."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from gateway.loadgen.caller import CallResult, TurnResult
from gateway.loadgen.turns import percentile
from gateway.loadgen.watch import COUNTERS, DRAFTS, LABELLED, PREEMPTIVE, PoolWatch, labelled_key

# The gateway's stages shown per turn (its gateway.latency keys).
STAGE_KEYS = ("vad_end_of_turn", "stt", "llm_first_token", "first_sentence", "tts_first_chunk")
STAGE_HEAD = "end of turn / STT / LLM 1st token / 1st clause / TTS 1st chunk ms"
# Where a turn's time went (the gateway's ``detail_ms`` keys, after the VAD's end of turn), with
# the breakdown table's heads; "to caller" is the caller's voice-to-voice less the gateway's.
DETAIL_KEYS = (
    ("stt_wait", "STT wait"),
    ("stt_compute", "STT"),
    ("respond", "reply asked"),
    ("llm_queue", "LLM queue"),
    ("prompt_read", "prompt read"),
    ("first_clause_decode", "1st clause decode"),
    ("tts_wait", "TTS wait"),
    ("tts_compute", "TTS"),
    ("playout", "playout"),
)


PREEMPTIVE_OUTCOMES = ("used", "discarded", "skipped")
DRAFT_RESULTS = ("started", "hits", "discarded", "skipped")


@dataclass
class Phase:
    """One phase of a run: ``callers`` callers (``alone``: the lone-caller baseline), their
    results, how long it took, the gateway's counters over it and its ``/v1/pool`` samples."""

    callers: int
    alone: bool
    calls: list[CallResult]
    wall_s: float
    counters: dict[str, float] = field(default_factory=dict)
    watch: Optional[PoolWatch] = None
    cpu_cores: Optional[float] = None  # the gateway process's CPU over the phase (local gateway only)
    silent: bool = False  # callers who connect and say nothing

    @property
    def name(self) -> str:
        if self.silent:
            return f"{self.callers} silent callers"
        return "alone" if self.alone else f"{self.callers} callers"

    @property
    def at_once(self) -> int:
        """Callers at the same time: 1 for the lone baseline (its calls follow each other)."""
        return 1 if self.alone else self.callers

    @property
    def turns(self) -> list[TurnResult]:
        return [turn for call in self.calls for turn in call.turns]

    @property
    def v2v(self) -> list[float]:
        return [t.v2v_ms for t in self.turns if t.v2v_ms is not None]

    @property
    def refused(self) -> list[CallResult]:
        return [c for c in self.calls if c.refused]

    def preemptive(self) -> Optional[dict[str, int]]:
        """The gateway's preemptive replies over the phase by outcome (``used``, ``discarded``,
        ``skipped``; deltas of ``vg_preemptive_replies_total``), or None when it exports none."""
        return self._labelled(PREEMPTIVE, PREEMPTIVE_OUTCOMES)

    def drafts(self) -> Optional[dict[str, int]]:
        """The gateway's speculative transcripts (pauses' drafts and barge-in probes) over the phase by result
        (``started``, ``hits``, ``discarded``, ``skipped``; deltas of ``vg_stt_speculative_total``),
        or None when it exports none."""
        return self._labelled(DRAFTS, DRAFT_RESULTS)

    def _labelled(self, name: str, values: tuple[str, ...]) -> Optional[dict[str, int]]:
        label = LABELLED[name]
        found = {v: self.counters.get(labelled_key(name, label, v)) for v in values}
        if all(value is None for value in found.values()):
            return None
        return {value: round(count or 0.0) for value, count in found.items()}

    def stats(self) -> dict[str, Optional[float]]:
        """``p50``, ``p95`` and ``max`` of the answered turns' voice-to-voice, ms (None: none)."""
        values = self.v2v
        if not values:
            return {"p50": None, "p95": None, "max": None}
        return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95), "max": max(values)}


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ratio(value: Optional[float], base: Optional[float]) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}×"


def summary_table(phases: list[Phase], lone: Optional[Phase]) -> str:
    """One row per phase: admitted / refused (codes, Retry-After), turns answered, voice-to-voice
    p50 / p95 / max and their ratio to the lone caller's, deadline misses, the gateway's CPU and
    its preemptive replies (used / discarded / skipped)."""
    base = lone.stats() if lone is not None else {"p50": None, "p95": None}
    head = (
        "| phase | admitted | refused (code, Retry-After) | turns answered | v2v p50 ms | v2v p95 ms | max ms "
        "| p50 × alone | p95 × alone | deadline misses | gateway CPU (cores) | preemptive used / discarded / skipped |"
    )
    rows = [head, "|" + "---|" * 12]
    for phase in phases:
        stats = phase.stats()
        refused = phase.refused
        codes = Counter(f"{c.code or c.status or c.error[:20]}" for c in refused)
        retry = sorted({c.retry_after for c in refused if c.retry_after})
        refusal = ", ".join(f"{code} ×{n}" for code, n in codes.items()) if refused else "none"
        if retry:
            refusal += f" (Retry-After {'/'.join(retry)} s)"
        turns = phase.turns
        answered = sum(1 for t in turns if t.v2v_ms is not None)
        misses = phase.counters.get("vg_playout_underruns")
        cpu = "-" if phase.cpu_cores is None else f"{phase.cpu_cores:.2f}"
        rows.append(
            f"| {phase.name} | {len(phase.calls) - len(refused)} of {len(phase.calls)} | {refusal} "
            f"| {answered} of {len(turns)} | {_ms(stats['p50'])} | {_ms(stats['p95'])} | {_ms(stats['max'])} "
            f"| {_ratio(stats['p50'], base['p50'])} | {_ratio(stats['p95'], base['p95'])} "
            f"| {'n/a' if misses is None else f'{misses:.0f}'} | {cpu} | {_preemptive_cell(phase)} |"
        )
    return "\n".join(rows)


def _preemptive_cell(phase: Phase) -> str:
    counts = phase.preemptive()
    return "n/a" if counts is None else " / ".join(str(counts[o]) for o in PREEMPTIVE_OUTCOMES)


def turn_table(phase: Phase, lone: Optional[Phase]) -> str:
    """One row per turn of ``phase``: caller, turn, question, start, voice-to-voice (and × the lone
    caller's median on the same question), the gateway's stage times, answer length, heard -> said."""
    alone = _lone_by_question(lone)
    rows = [
        f"| caller | turn | question | at s | v2v ms | × alone | {STAGE_HEAD} | answer s | heard -> said |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for turn in sorted(phase.turns, key=lambda t: (t.caller, t.turn)):
        v2v = _ms(turn.v2v_ms) if not turn.failed else f"failed: {turn.failed[:60]}"
        stages = " / ".join(_ms(turn.stages.get(key)) for key in STAGE_KEYS)
        reply = "-" if turn.reply_s is None else f"{turn.reply_s:.1f}"
        rows.append(
            f"| {turn.caller + 1} | {turn.turn + 1} | {turn.question} | {turn.at_s:.1f} | {v2v} "
            f"| {_ratio(turn.v2v_ms, alone.get(turn.question))} | {stages} | {reply} "
            f"| {'MIXED UP (' + turn.mixed + '): ' if turn.mixed else ''}{turn.heard[:32]!r} -> {turn.said[:40]!r} |"
        )
    return "\n".join(rows)


def mixup_line(phase: Phase) -> str:
    """Whether every answered turn heard and answered its own caller's question
    (``TurnResult.mixed``, :mod:`gateway.loadgen.mixups`), with the turns that did not."""
    checked = [t for t in phase.turns if t.heard or t.said]
    mixed = [t for t in checked if t.mixed]
    leaks = [t for t in mixed if "heard" in t.mixed or "said" in t.mixed]
    line = f"own question heard and answered: {len(checked) - len(mixed)} of {len(checked)} turns"
    if mixed:
        line += (
            f"; MIXED UP: {len(leaks)} with another caller's words, {len(mixed) - len(leaks)} stale ("
            + "; ".join(f"caller {t.caller + 1} turn {t.turn + 1}: {t.mixed}" for t in mixed)
            + ")"
        )
    return line


def breakdown_table(phases: list[Phase]) -> str:
    """Where the time of a turn went, per phase: the median of each span (ms) over all its
    answered turns, and over its slowest third (by voice-to-voice); with the prompt tokens read
    (not cached) and the reply's tokens, medians."""
    heads = " | ".join(label for _, label in DETAIL_KEYS)
    rows = [
        f"| phase | turns | v2v | end of turn | {heads} | to caller | prompt tokens read | reply tokens |",
        "|" + "---|" * (len(DETAIL_KEYS) + 7),
    ]
    for phase in phases:
        turns = sorted((t for t in phase.turns if t.v2v_ms is not None), key=lambda t: t.v2v_ms or 0.0)
        if not turns:
            continue
        slow = turns[-max(1, len(turns) // 3) :]
        for label, chosen in (("all", turns), ("slowest third", slow)):
            rows.append(f"| {phase.name}, {label} | {len(chosen)} | {_breakdown_cells(chosen)} |")
    return "\n".join(rows)


def _median_of(values: list[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _breakdown_cells(turns: list[TurnResult]) -> str:
    cells = [_median_of([t.v2v_ms for t in turns]), _median_of([t.stages.get("vad_end_of_turn") for t in turns])]
    cells += [_median_of([t.detail.get(key) for t in turns]) for key, _ in DETAIL_KEYS]
    gateway_v2v: list[Optional[float]] = []
    for t in turns:
        inside = t.stages.get("voice_to_voice")
        gateway_v2v.append(None if t.v2v_ms is None or inside is None else t.v2v_ms - inside)
    cells.append(_median_of(gateway_v2v))
    read: list[Optional[float]] = [float(t.tokens["prompt"] - t.tokens["cached"]) if t.tokens else None for t in turns]
    said: list[Optional[float]] = [float(t.tokens["output"]) if t.tokens else None for t in turns]
    cells += [_median_of(read), _median_of(said)]
    return " | ".join(_ms(c) for c in cells)


def caller_table(phase: Phase) -> str:
    """One row per caller of ``phase``: admitted or refused, turns answered, median and max v2v."""
    rows = ["| caller | offer | turns answered | v2v median ms | v2v max ms |", "|---|---|---|---|---|"]
    for call in phase.calls:
        values = [t.v2v_ms for t in call.turns if t.v2v_ms is not None]
        offer = "201" if not call.refused else f"{call.status or call.error} {call.code}".strip()
        offer += f" in {call.offer_ms:.0f} ms" if call.offer_ms is not None else ""
        median = statistics.median(values) if values else None
        rows.append(
            f"| {call.caller + 1} | {offer} | {len(values)} of {len(call.turns)} | {_ms(median)} "
            f"| {_ms(max(values) if values else None)} |"
        )
    return "\n".join(rows)


def refusal_lines(phase: Phase) -> list[str]:
    """Why the gateway refused the callers of ``phase`` (the 503 body's message: which admission
    rule, with its figures), one line per refused caller; none when all were admitted."""
    return [
        f"caller {call.caller + 1} refused: {call.message or call.code or call.error or call.status}"
        for call in phase.refused
    ]


def counters_line(phase: Phase) -> str:
    """The gateway's counters over ``phase`` (deltas), by their table names, its preemptive
    replies by outcome and its speculative transcripts by result."""
    parts = [f"{label}: {phase.counters[name]:g}" for name, label in COUNTERS.items() if name in phase.counters]
    counts = phase.preemptive()
    if counts is not None:
        parts.append("preemptive replies: " + ", ".join(f"{o} {counts[o]}" for o in PREEMPTIVE_OUTCOMES))
    drafts = phase.drafts()
    if drafts is not None:
        parts.append("speculative STT: " + ", ".join(f"{r} {drafts[r]}" for r in DRAFT_RESULTS))
    return "; ".join(parts) if parts else "gateway counters: n/a"


def load_line(phase: Phase) -> str:
    """What ``/v1/pool`` said over ``phase``: peak units in use and the admission's load figures."""
    watch = phase.watch
    if watch is None or not watch.samples:
        return "/v1/pool: n/a"
    parts = [f"peak units in use {watch.peak_in_use}"]
    for key in ("load", "estimate", "calls_fit", "llm_share", "call_cost_llm", "call_cost_cores", "cpu_cores"):
        peak = watch.peak(key)
        if peak is not None:
            parts.append(f"peak {key} {peak:g}")
    return "/v1/pool: " + ", ".join(parts)


def _lone_by_question(lone: Optional[Phase]) -> dict[str, float]:
    if lone is None:
        return {}
    by: dict[str, list[float]] = {}
    for turn in lone.turns:
        if turn.v2v_ms is not None:
            by.setdefault(turn.question, []).append(turn.v2v_ms)
    return {question: statistics.median(values) for question, values in by.items()}


def as_json(phases: list[Phase], machine: dict[str, Any]) -> dict[str, Any]:
    """The whole run as plain data (``--json``)."""
    return {
        "machine": machine,
        "phases": [
            {
                "name": p.name,
                "callers": p.callers,
                "wall_s": round(p.wall_s, 1),
                "stats_ms": p.stats(),
                "counters": p.counters,
                "preemptive_replies": p.preemptive(),
                "stt_drafts": p.drafts(),
                "cpu_cores": p.cpu_cores,
                "pool_samples": [
                    {"t": round(t, 1), "in_use": n, "capacity": c} for t, n, c in (p.watch.samples if p.watch else [])
                ],
                "calls": [
                    {
                        "caller": c.caller,
                        "status": c.status,
                        "code": c.code,
                        "message": c.message,
                        "retry_after": c.retry_after,
                        "offer_ms": c.offer_ms,
                        "error": c.error,
                        "turns": [t.__dict__ for t in c.turns],
                        "log": c.log,
                    }
                    for c in p.calls
                ],
            }
            for p in phases
        ],
    }
