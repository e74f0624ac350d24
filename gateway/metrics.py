"""Prometheus metrics and usage totals of one gateway process (``GET /metrics``, ``GET /v1/usage``).

What the other layers report, and through which hook (none of them imports this module):

- the app (``gateway.server.app``) wires the hooks: the units' frame hooks
  (:meth:`GatewayMetrics.inbound_frame`, :meth:`GatewayMetrics.outbound_frame`), the metered models
  (:meth:`GatewayMetrics.model_compute`), every pipeline event (:meth:`observe_pipeline_event`:
  barge-ins, per-stage turn latency) and every Realtime server event sent to a client
  (:meth:`observe_server_event`: ``error`` by code, ``response.done`` by status and its tokens);
- a transport reports its calls: :meth:`call_started` / :meth:`call_ended` (``transport`` is
  ``webrtc`` or ``websocket``); the SIP user agent its SRTP packets dropped (``srtp_dropped``,
  wired by ``gateway.server.sip_routes``).

Metric names start ``vg_``; durations in their names (``_ms``, ``_seconds``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

_LATENCY_BUCKETS_MS = (25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 8000, 13000, 20000)
# Model calls last from ~0.1 ms (a VAD chunk) to seconds (a long LLM reply).
_COMPUTE_BUCKETS_S = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
FRAME_S = 0.02  # one outbound frame: 20 ms (gateway.media.outbound.FRAME_MS)
RESPONSE_STATUSES = ("completed", "incomplete", "cancelled", "failed")


@dataclass
class Usage:
    """Totals since the process started, the body of ``GET /v1/usage``: caller audio received
    and reply audio sent (seconds), LLM tokens, responses by final status, calls opened."""

    audio_in_s: float = 0.0
    audio_out_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    responses: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESPONSE_STATUSES, 0))
    calls: int = 0

    def as_json(self) -> dict[str, Any]:
        """``{"audio_in_s", "audio_out_s", "input_tokens", "output_tokens", "total_tokens",
        "responses": {"completed", "incomplete", "cancelled", "failed"}, "calls"}``."""
        return {
            "audio_in_s": round(self.audio_in_s, 3),
            "audio_out_s": round(self.audio_out_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "responses": dict(self.responses),
            "calls": self.calls,
        }


class GatewayMetrics:
    """All metrics on a registry of their own (so several apps in one test process do not clash).
    Every method is thread-safe (stage threads report model compute)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._usage = Usage()
        self.calls = Counter("vg_calls_total", "Offers by result", ["result"], registry=registry)
        self.http_connections_refused = Counter(
            "vg_http_connections_refused",
            "HTTP connections refused (429) for their source's max_http_connections_per_source",
            registry=registry,
        )
        self.call_end = Counter("vg_call_end_total", "Ended calls by reason", ["reason"], registry=registry)
        self.calls_ended = Counter(
            "vg_calls_ended_total",
            "Ended calls by transport and end reason",
            ["transport", "reason"],
            registry=registry,
        )
        self.active_sessions = Gauge(
            "vg_active_sessions", "Calls in progress by transport", ["transport"], registry=registry
        )
        self.units = Gauge("vg_pool_units", "Units by state", ["state"], registry=registry)
        self.turn_latency = Histogram(
            "vg_turn_latency_ms",
            "Per-turn latency by stage, ms",
            ["stage"],
            buckets=_LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.recoveries = Counter("vg_unit_recoveries_total", "Stuck units rebuilt", registry=registry)
        self.outbound_frames = Counter(
            "vg_outbound_frames_total", "20 ms frames sent to callers, by content", ["content"], registry=registry
        )
        self.outbound_late = Counter(
            "vg_outbound_frames_late_total",
            "Outbound frames sent over 20 ms after they were due (pacing misses)",
            registry=registry,
        )
        self.inbound_frames = Counter(
            "vg_inbound_frames_total", "Audio frames received from callers", registry=registry
        )
        self.inbound_audio = Counter("vg_inbound_audio_seconds_total", "Caller audio received, s", registry=registry)
        self.barge_ins = Counter("vg_barge_ins_total", "Responses cancelled by caller speech", registry=registry)
        self.barge_in_decisions = Counter(
            "vg_barge_in_decisions_total",
            "Caller speech under reply audio judged by its words: resumed (a backchannel) or interrupted",
            ["decision"],
            registry=registry,
        )
        self.errors = Counter(
            "vg_errors_total", "Realtime 'error' events sent to clients, by code", ["code"], registry=registry
        )
        self.responses = Counter("vg_responses_total", "Responses by final status", ["status"], registry=registry)
        self.tokens = Counter(
            "vg_tokens_total", "LLM tokens of responses, by kind (input, output)", ["kind"], registry=registry
        )
        self.compute = Histogram(
            "vg_model_compute_seconds",
            "Compute per model call by stage, s (queue wait excluded)",
            ["stage"],
            buckets=_COMPUTE_BUCKETS_S,
            registry=registry,
        )
        self.srtp_dropped = Counter(
            "vg_sip_srtp_dropped_total",
            "SRTP/SRTCP packets of SIP calls dropped unplayed, by reason: authentication (a wrong key, forged or "
            "corrupted), replay",
            ["reason"],
            registry=registry,
        )
        self.draining = Gauge("vg_draining", "1 while the process is shutting down (admits no call)", registry=registry)
        self._llm_queue_watched = False
        self._speculation_watched = False
        self._capacity_watched = False

    # ----- calls -----
    def call_started(self, transport: str) -> None:
        """A call of ``transport`` (``webrtc``, ``websocket``) was opened."""
        self.active_sessions.labels(transport=transport).inc()
        with self._lock:
            self._usage.calls += 1

    def call_ended(self, transport: str, reason: str) -> None:
        """A call of ``transport`` ended for ``reason`` (an EndReason value)."""
        self.active_sessions.labels(transport=transport).dec()
        self.call_end.labels(reason=reason).inc()
        self.calls_ended.labels(transport=transport, reason=reason).inc()

    # ----- media (frame hooks of the units' tracks, on the event loop) -----
    def inbound_frame(self, samples: int, rate: int) -> None:
        """One caller frame of ``samples`` at ``rate`` Hz reached the VAD's input."""
        self.inbound_frames.inc()
        if rate > 0:
            seconds = samples / rate
            self.inbound_audio.inc(seconds)
            with self._lock:
                self._usage.audio_in_s += seconds

    def outbound_frame(self, audio: bool, late: bool) -> None:
        """One 20 ms frame left an output track (or a WebSocket's reply audio, as audio never
        late): ``audio`` reply audio (else silence), ``late`` more than a frame after it was due."""
        self.outbound_frames.labels(content="audio" if audio else "silence").inc()
        if late:
            self.outbound_late.inc()
        if audio:
            with self._lock:
                self._usage.audio_out_s += FRAME_S

    # ----- models -----
    def model_compute(self, stage: str, seconds: float) -> None:
        """One model call of ``stage`` (vad, end_of_turn, stt, llm, tts) computed for ``seconds``."""
        self.compute.labels(stage=stage).observe(seconds)

    # ----- events -----
    def observe_latency(self, latency_ms: dict[str, Optional[float]]) -> None:
        """Add one turn's ``TurnLatency.as_ms()`` (stage -> ms) to ``vg_turn_latency_ms``, one
        sample per stage label; stages the turn never reached (None) are skipped."""
        for stage, value in latency_ms.items():
            if value is not None:
                self.turn_latency.labels(stage=stage).observe(value)

    def observe_pipeline_event(self, event: Any) -> None:
        """A pipeline event of any call (``gateway.pipeline.events``): a ``TurnLatencyMeasured``
        adds its latency, a ``ResponseInterrupted`` counts a barge-in, a ``BargeInDecided`` its decision."""
        kind = type(event).__name__
        if kind == "TurnLatencyMeasured":
            self.observe_latency(event.latency_ms)
        elif kind == "ResponseInterrupted":
            self.barge_ins.inc()
        elif kind == "BargeInDecided":
            self.barge_in_decisions.labels(decision=event.decision).inc()

    def observe_server_event(self, event: dict[str, Any]) -> None:
        """A Realtime server event sent to a client (any transport): ``error`` counts by its code
        (``none`` when it has none); ``response.done`` counts by status and adds its usage tokens."""
        kind = event.get("type")
        if kind == "error":
            error = event.get("error") or {}
            self.errors.labels(code=str(error.get("code") or "none")).inc()
        elif kind == "response.done":
            response = event.get("response") or {}
            status = str(response.get("status") or "completed")
            usage = response.get("usage") or {}
            input_tokens = int(usage.get("input_tokens") or 0)
            output_tokens = int(usage.get("output_tokens") or 0)
            self.responses.labels(status=status).inc()
            self.tokens.labels(kind="input").inc(input_tokens)
            self.tokens.labels(kind="output").inc(output_tokens)
            with self._lock:
                self._usage.responses[status] = self._usage.responses.get(status, 0) + 1
                self._usage.input_tokens += input_tokens
                self._usage.output_tokens += output_tokens

    def usage(self) -> Usage:
        """A copy of the usage totals."""
        with self._lock:
            usage = self._usage
            return Usage(
                usage.audio_in_s,
                usage.audio_out_s,
                usage.input_tokens,
                usage.output_tokens,
                dict(usage.responses),
                usage.calls,
            )

    # ----- collectors read at scrape time -----
    def watch_llm_queue(self, llm: Any) -> None:
        """Export the shared LLM engine's queue waits as ``vg_llm_queue_wait_ms`` (a histogram read
        from ``llm.queue.stats`` at each scrape; engines without a queue are skipped) and its
        queue now as ``vg_llm_turns{state="running"|"waiting"}``."""
        stats = getattr(getattr(llm, "queue", None), "stats", None)
        if stats is not None and not self._llm_queue_watched:
            self.registry.register(_QueueWaitCollector(stats))
            self.registry.register(_ComputeQueueCollector(llm.queue))
            self._llm_queue_watched = True

    def watch_speculation(self, units: list[Any]) -> None:
        """Export the speculative STT of ``units`` (pool units: ``unit.chain.stt.speculation``, a
        ``SpeculationStats``) as ``vg_stt_speculative_total{result}`` (started, hits, discarded,
        skipped; drafts: made while the caller spoke; from_drafts: pauses' that were a draft) and
        ``vg_stt_speculative_wasted_seconds_total``, and the units' preemptive replies
        (``unit.preemptive``) as ``vg_preemptive_replies_total{outcome}`` (used, discarded,
        skipped), read at each scrape (a unit rebuilt after a stuck drain starts its counts again)."""
        if not self._speculation_watched:
            self.registry.register(_SpeculationCollector(units))
            self._speculation_watched = True

    def watch_capacity(self, capacity_now: Callable[[], Any]) -> None:
        """Export the admission by measured load, read from ``capacity_now()`` (a
        ``gateway.pool.capacity.CapacityNow``) at each scrape: ``vg_load`` (how full the box is, 1.0
        at its target: an autoscaler's signal), ``vg_calls_fit`` (talking conversations estimated to
        fit), ``vg_call_cost_cores``, ``vg_call_cost_llm`` and ``vg_llm_busy_share`` (with a batched LLM
        decoder: one talking call's share of its step thread, and the share it computed over 30 s),
        ``vg_live_calls``, ``vg_talkers`` (talking calls),
        ``vg_talking_capacity{source}`` (the calls admitted at once: the estimate or the setting;
        absent when off), ``vg_cpu_cores{scope}`` (process, box), ``vg_first_clause_ms{kind}``
        (p90 of the window's turns, the lone reference), ``vg_admission_busy`` (1 while new calls
        are refused), ``vg_playout_underruns_total`` and ``vg_playout_underrun_seconds_total``
        (deadline misses: replies whose audio ran dry) and ``vg_decode_step_ms{size}``."""
        if not self._capacity_watched:
            self.registry.register(_CapacityCollector(capacity_now))
            self._capacity_watched = True

    def render(self) -> bytes:
        """This registry in the Prometheus text exposition format, as ``GET /metrics`` serves it."""
        return generate_latest(self.registry)


class _QueueWaitCollector(Collector):
    """``vg_llm_queue_wait_ms`` from a ``gateway.models.compute.engine_queue.QueueWaitStats`` (per process)."""

    def __init__(self, stats: Any) -> None:
        self._stats = stats

    def collect(self) -> Iterator[HistogramMetricFamily]:
        snapshot = self._stats.snapshot()
        bounds = [str(b) for b in snapshot.bucket_bounds_ms] + ["+Inf"]
        buckets, total = [], 0
        for bound, count in zip(bounds, snapshot.bucket_counts, strict=True):
            total += count
            buckets.append((bound, float(total)))
        yield HistogramMetricFamily(
            "vg_llm_queue_wait_ms",
            "Wait for the shared LLM engine per admission, ms",
            buckets=buckets,
            sum_value=snapshot.sum_ms,
        )


class _ComputeQueueCollector(Collector):
    """``vg_llm_turns{state}``: generations running and waiting on the shared engine now."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def collect(self) -> Iterator[GaugeMetricFamily]:
        load = self._queue.load()
        family = GaugeMetricFamily("vg_llm_turns", "LLM generations now, by state", labels=["state"])
        family.add_metric(["running"], float(load.running))
        family.add_metric(["waiting"], float(load.waiting))
        yield family


class _CapacityCollector(Collector):
    """The admission's load and estimate (see :meth:`Metrics.watch_capacity`) from a
    ``CapacityNow`` read at scrape time; the playout underruns are the units' totals so far."""

    def __init__(self, capacity_now: Callable[[], Any]) -> None:
        self._now = capacity_now

    def collect(self) -> Iterator[Any]:
        now = self._now()
        view = now.as_json()
        yield GaugeMetricFamily("vg_load", "How full the box is (1.0: at its target)", value=float(view["load"]))
        yield GaugeMetricFamily(
            "vg_calls_fit", "Talking conversations estimated to fit", value=float(view["calls_fit"])
        )
        yield GaugeMetricFamily("vg_call_cost_cores", "Cores one talking call takes", value=view["call_cost_cores"])
        if view["call_cost_llm"] is not None:
            yield GaugeMetricFamily(
                "vg_call_cost_llm", "Share of the LLM's step thread one talking call takes", value=view["call_cost_llm"]
            )
            yield GaugeMetricFamily(
                "vg_llm_busy_share",
                "Share of the last 30 s (wall time, 0 to 1) the LLM's step thread computed work a turn waits for",
                value=view["llm_share"],
            )
        yield GaugeMetricFamily("vg_live_calls", "Live calls", value=float(view["live"]))
        yield GaugeMetricFamily("vg_talkers", "Live calls with a recent turn", value=float(view["talkers"]))
        yield GaugeMetricFamily("vg_admission_busy", "1 while new calls are refused", value=float(view["busy"]))
        limit = GaugeMetricFamily(
            "vg_talking_capacity", "Calls admitted at once by compute (estimate or setting)", labels=["source"]
        )
        if now.limit is not None:
            limit.add_metric([now.source], float(now.limit))
        yield limit
        cpu = GaugeMetricFamily("vg_cpu_cores", "Busy cores over the last 30 s", labels=["scope"])
        cpu.add_metric(["process"], float(view["cpu_cores"]))
        cpu.add_metric(["box"], float(view["box_cores"]))
        yield cpu
        first = GaugeMetricFamily("vg_first_clause_ms", "Turn end to first answer audio, ms", labels=["kind"])
        for kind, key in (("p90", "first_clause_ms"), ("lone", "reference_ms")):
            if view[key] is not None:
                first.add_metric([kind], float(view[key]))
        yield first
        load = now.load
        yield CounterMetricFamily(
            "vg_playout_underruns", "Replies whose audio ran dry before their end", value=load.misses_total
        )
        yield CounterMetricFamily("vg_playout_underrun_seconds", "Silence inside replies, s", value=load.missed_total_s)
        steps = GaugeMetricFamily("vg_decode_step_ms", "Typical LLM decode step by batch size, ms", labels=["size"])
        for size, ms in now.step_ms.items():
            steps.add_metric([str(size)], float(ms))
        yield steps


class _SpeculationCollector(Collector):
    """Speculative STT counters summed over the units' STT stages (stages without them skipped)."""

    def __init__(self, units: list[Any]) -> None:
        self._units = units

    def collect(self) -> Iterator[CounterMetricFamily]:
        results = ("started", "hits", "discarded", "skipped", "drafts", "from_drafts")
        totals = dict.fromkeys((*results, "wasted_s"), 0.0)
        for unit in self._units:
            stats = getattr(getattr(getattr(unit, "chain", None), "stt", None), "speculation", None)
            if stats is not None:
                for key, value in stats.snapshot().items():
                    totals[key] = totals.get(key, 0.0) + float(value)
        runs = CounterMetricFamily("vg_stt_speculative", "Speculative transcriptions by result", labels=["result"])
        for result in results:
            runs.add_metric([result], totals[result])
        yield runs
        yield CounterMetricFamily(
            "vg_stt_speculative_wasted_seconds",
            "Compute of discarded speculative transcriptions, s",
            value=totals["wasted_s"],
        )
        outcomes = {"used": 0.0, "discarded": 0.0, "skipped": 0.0}
        for unit in self._units:
            preemptive = getattr(unit, "preemptive", None)
            if preemptive is not None:
                for key, value in preemptive.counts().items():
                    outcomes[key] = outcomes.get(key, 0.0) + value
        replies = CounterMetricFamily(
            "vg_preemptive_replies",
            "Replies started at the caller's pause, by outcome: used (the turn ended with those words), "
            "discarded (unheard), skipped (not started: a reply still going, or the LLM busy)",
            labels=["outcome"],
        )
        for outcome, value in outcomes.items():
            replies.add_metric([outcome], value)
        yield replies
