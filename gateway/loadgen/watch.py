"""What the gateway says of its own load while the callers talk: ``GET /v1/pool`` (units in use,
the admission's load estimate, the LLM's decode step times) polled through a phase, and counters
of ``GET /metrics`` read before and after it (deadline misses: reply audio that ran dry before the
reply's end; the preemptive replies by outcome). A gateway that lacks a field or a metric (an
older version) is shown as such, not failed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

# Counters read before and after each phase (name -> what the table calls it).
COUNTERS = {
    "vg_playout_underruns": "deadline misses (reply audio ran dry)",
    "vg_playout_underrun_seconds": "reply audio missing, s",
    "vg_outbound_late_frames": "late outbound frames",
}
# Counters read per label value, keyed ``name{label="value"}`` (name -> label): the replies started
# at the caller's pause (``gateway.pool.preemptive``) by outcome: used, discarded, skipped.
# And the speculative transcripts at the callers' pauses (``gateway.pipeline.stt``) by result:
# started, hits, discarded, skipped.
LABELLED = {"vg_preemptive_replies": "outcome", "vg_stt_speculative": "result"}
PREEMPTIVE = "vg_preemptive_replies"
DRAFTS = "vg_stt_speculative"


def labelled_key(name: str, label: str, value: str) -> str:
    """The key of one label value of a :data:`LABELLED` counter: ``name{label="value"}``."""
    return f'{name}{{{label}="{value}"}}'


async def get_json(url: str, path: str, headers: Optional[dict] = None) -> dict[str, Any]:
    """``GET url+path`` as JSON; {} when it fails (the table shows what is missing)."""
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{url}{path}", headers=headers) as response:
            if response.status != 200:
                return {}
            body = await response.json()
            return body if isinstance(body, dict) else {}
    except (aiohttp.ClientError, OSError, ValueError):
        return {}


async def reach(url: str, headers: Optional[dict] = None) -> dict[str, Any]:
    """``GET url/v1/pool`` once, before a run: its JSON ({} when it is no JSON object: an older
    gateway). RuntimeError in one line when nothing answers at ``url`` (connection refused, no such
    host, no answer in 10 s), the gateway refuses ``headers``' key (401, 403) or another status
    says it is no gateway (a 404 from another server on that port)."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.get(f"{url}/v1/pool", headers=headers) as response,
        ):
            if response.status in (401, 403):
                raise RuntimeError(
                    f"the gateway at {url} refused the API key ({response.status}): give its key with --api-key "
                    "or VG_API_KEY"
                )
            if response.status != 200:
                raise RuntimeError(f"{url} is no voice gateway: GET /v1/pool answered {response.status}")
            body = await response.json(content_type=None)
    except aiohttp.ClientConnectorError as exc:
        why = "connection refused" if isinstance(exc.os_error, ConnectionRefusedError) else str(exc.os_error)
        raise RuntimeError(f"cannot reach the gateway at {url}: {why}") from None
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise RuntimeError(f"cannot reach the gateway at {url}: {exc or type(exc).__name__}") from None
    except ValueError:  # not JSON
        body = {}
    return body if isinstance(body, dict) else {}


async def counters(url: str, headers: Optional[dict] = None) -> dict[str, float]:
    """The :data:`COUNTERS` of ``GET /metrics`` (each summed over its labels) and the
    :data:`LABELLED` ones per label value (:func:`labelled_key`); absent ones left out."""
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics", headers=headers) as response:
            text = await response.text()
    except (aiohttp.ClientError, OSError):
        return {}
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in COUNTERS:
            total = sum(s.value for s in family.samples if s.name.endswith("_total"))
            found[family.name] = total
        label = LABELLED.get(family.name)
        if label is not None:
            for sample in family.samples:
                if sample.name.endswith("_total") and label in sample.labels:
                    found[labelled_key(family.name, label, sample.labels[label])] = sample.value
    return found


def decode_tok_s(pool: dict[str, Any]) -> Optional[float]:
    """The gateway's lone decode speed, tokens/s on its busy-thread setting (1 thread by default),
    from the decode step times of ``/v1/pool``'s ``capacity.step_ms``; None without them (an
    engine without a batch decoder)."""
    lone = (pool.get("capacity") or {}).get("step_ms", {}).get("1")
    return 1000.0 / lone if lone else None


@dataclass
class PoolWatch:
    """``/v1/pool`` polled every ``every_s`` while a phase runs: ``samples`` of (s since start,
    units in use, the ``capacity`` object)."""

    url: str
    every_s: float = 1.0
    headers: Optional[dict] = None
    samples: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    _task: Optional[asyncio.Task] = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._poll())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        started = time.monotonic()
        while True:
            pool = await get_json(self.url, "/v1/pool", self.headers)
            if pool:
                self.samples.append(
                    (time.monotonic() - started, int(pool.get("in_use", 0)), pool.get("capacity") or {})
                )
            await asyncio.sleep(self.every_s)

    def peak(self, key: str) -> Optional[float]:
        """The largest numeric ``capacity[key]`` seen, or None."""
        values = [c[key] for _, _, c in self.samples if isinstance(c.get(key), (int, float))]
        return max(values) if values else None

    @property
    def peak_in_use(self) -> int:
        return max((n for _, n, _ in self.samples), default=0)
