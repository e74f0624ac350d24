"""Turn latency against callers, as an SVG document (written here: no plotting library).

Every answered turn is a dot at its phase's number of callers; lines join each phase's p50 and
p95; dashed lines mark the bounds a deployment is sized by (1.5× the lone caller's p50, 2× its p95).
"""

from __future__ import annotations

from typing import Optional

from gateway.loadgen.report import Phase
from gateway.loadgen.turns import percentile

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 60, 20, 40, 50


class _Axes:
    """Maps callers (x) and milliseconds (y) to SVG coordinates."""

    def __init__(self, callers: list[int], top_ms: float) -> None:
        self.callers = callers
        self.top_ms = top_ms

    def x(self, n: float) -> float:
        low, high = min(self.callers), max(self.callers)
        if high == low:
            return LEFT + (WIDTH - LEFT - RIGHT) / 2
        return LEFT + (n - low) / (high - low) * (WIDTH - LEFT - RIGHT)

    def y(self, ms: float) -> float:
        return TOP + (1 - ms / self.top_ms) * (HEIGHT - TOP - BOTTOM)


def svg_plot(phases: list[Phase], lone: Optional[Phase], title: str) -> str:
    """The plot of ``phases`` (the lone phase included as 1 caller), bounds from ``lone``."""
    loaded = [p for p in phases if p.v2v]
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif"'
    out = [head + ' font-size="12">', f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    out.append(f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{_escape(title)}</text>')
    if not loaded:
        return "\n".join([*out, '<text x="60" y="60">no answered turns</text>', "</svg>"])
    base = lone.stats() if lone is not None else {"p50": None, "p95": None}
    bounds = [(1.5 * v, "1.5× lone p50") for v in [base["p50"]] if v] + [
        (2 * v, "2× lone p95") for v in [base["p95"]] if v
    ]
    top_ms = max([max(max(p.v2v) for p in loaded), *(b for b, _ in bounds)]) * 1.1
    axes = _Axes(sorted({p.at_once for p in loaded}), top_ms)
    out += _frame(axes)
    for value, label in bounds:
        y = axes.y(value)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#c33" stroke-dasharray="6,4"/>'
        )
        out.append(f'<text x="{WIDTH - RIGHT - 4}" y="{y - 4:.1f}" text-anchor="end" fill="#c33">{label}</text>')
    for index, phase in enumerate(loaded):
        for k, value in enumerate(phase.v2v):
            cx = axes.x(phase.at_once) + ((k * 7 + index * 3) % 11 - 5) * 2.0
            out.append(f'<circle cx="{cx:.1f}" cy="{axes.y(value):.1f}" r="2.5" fill="#89a" fill-opacity="0.6"/>')
    for share, label, color in ((0.5, "p50", "#136"), (0.95, "p95", "#c70")):
        out += _line(axes, loaded, share, label, color)
    out.append("</svg>")
    return "\n".join(out)


def _frame(axes: _Axes) -> list[str]:
    """Axes, grid lines every round number of seconds, the callers' ticks and the axis label."""
    out = [
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" stroke="black"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="black"/>',
    ]
    step = next((s for s in (250.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0) if axes.top_ms / s <= 8), 20000.0)
    tick = 0.0
    while tick <= axes.top_ms:
        y = axes.y(tick)
        out.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick / 1000:g} s</text>')
        tick += step
    for n in axes.callers:
        out.append(f'<text x="{axes.x(n):.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{n}</text>')
    label = "callers at once (turn voice-to-voice)"
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">{label}</text>')
    return out


def _line(axes: _Axes, phases: list[Phase], share: float, label: str, color: str) -> list[str]:
    """The ``share`` percentile of each number of callers, joined (loaded phases before the lone one)."""
    points = []
    for n in axes.callers:
        values = [v for p in phases if p.at_once == n and not p.alone for v in p.v2v]
        values = values or [v for p in phases if p.at_once == n for v in p.v2v]
        points.append((axes.x(n), axes.y(percentile(values, share))))
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    out = [f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>']
    out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}"/>' for x, y in points]
    x, y = points[-1]
    out.append(f'<text x="{x - 8:.1f}" y="{y - 8:.1f}" text-anchor="end" fill="{color}">{label}</text>')
    return out


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
