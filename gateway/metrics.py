"""Prometheus metrics of one gateway process (served at ``GET /metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS_MS = (25, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 8000, 13000, 20000)


class GatewayMetrics:
    """All metrics on a registry of their own (so several apps in one test process do not clash)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter("vg_calls_total", "Offers by result", ["result"], registry=self.registry)
        self.call_end = Counter("vg_call_end_total", "Ended calls by reason", ["reason"], registry=self.registry)
        self.units = Gauge("vg_pool_units", "Units by state", ["state"], registry=self.registry)
        self.turn_latency = Histogram(
            "vg_turn_latency_ms", "Per-turn latency by stage, ms", ["stage"], buckets=_LATENCY_BUCKETS_MS, registry=self.registry
        )
        self.recoveries = Counter("vg_unit_recoveries_total", "Stuck units rebuilt", registry=self.registry)

    def observe_latency(self, latency_ms: dict) -> None:
        """Add one turn's ``TurnLatency.as_ms()`` (stage -> ms) to ``vg_turn_latency_ms``, one
        sample per stage label; stages the turn never reached (None) are skipped."""
        for stage, value in latency_ms.items():
            if value is not None:
                self.turn_latency.labels(stage=stage).observe(value)

    def render(self) -> bytes:
        """This registry in the Prometheus text exposition format, as ``GET /metrics`` serves it."""
        return generate_latest(self.registry)
