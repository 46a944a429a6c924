"""Plots as inline SVG, written from the numbers (no plotting library, no script).

Each plot is one ``<svg>`` element with a ``class`` naming it, one ``<g class="row">``
per plotted item (``data-label`` holds the item's label) and a ``<title>`` on every mark,
so a browser shows the exact value on hover and a test can count the marks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Interval", "Threshold", "bar_plot", "curve_plot", "latency_plot", "log_ticks", "threshold_plot"]

_ROW = 24
_LEFT = 190
_RIGHT = 70
_WIDTH = 760
_TOP = 12
_AXIS = 34
_OK = "#2e7d32"
_BAD = "#c62828"
_INK = "#1f4e79"


@dataclass(frozen=True)
class Interval:
    """A median with its p10-p90 spread (one row of :func:`latency_plot`)."""

    label: str
    median: float
    p10: float
    p90: float


@dataclass(frozen=True)
class Threshold:
    """A value against the limit it must stay under (one row of :func:`threshold_plot`).

    ``value`` None means not finite (drawn at the right edge as ∞).
    """

    label: str
    value: float | None
    limit: float
    ok: bool


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten from at or below ``lo`` to at or above ``hi`` (both > 0)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return [10.0 ** e for e in range(a, b + 1)]


class _LogAxis:
    """Maps positive values to x pixels on a log scale spanning whole decades."""

    def __init__(self, lo: float, hi: float) -> None:
        ticks = log_ticks(lo, hi)
        self.ticks = ticks
        self.a, self.b = math.log10(ticks[0]), math.log10(ticks[-1])

    def x(self, v: float) -> float:
        v = max(v, self.ticks[0])
        return _LEFT + (math.log10(v) - self.a) / (self.b - self.a) * (_WIDTH - _LEFT - _RIGHT)


def _frame(cls: str, rows: int, title: str, body: list[str], ticks: list[tuple[float, str]], unit: str) -> str:
    height = _TOP + rows * _ROW + _AXIS
    y_axis = _TOP + rows * _ROW
    parts = [(f'<svg class="plot {cls}" width="{_WIDTH}" height="{height}" '
             f'viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="{escape(title)}">'),
             f"<title>{escape(title)}</title>",
             f'<line class="axis" x1="{_LEFT}" y1="{y_axis}" x2="{_WIDTH - _RIGHT}" y2="{y_axis}" stroke="#555"/>']
    for x, text in ticks:
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{y_axis + 4}" stroke="#ddd"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{y_axis + 16}" text-anchor="middle" font-size="11">'
                     f"{escape(text)}</text>")
    parts.append(f'<text x="{(_LEFT + _WIDTH - _RIGHT) / 2:.0f}" y="{y_axis + 30}" text-anchor="middle" '
                 f'font-size="11" fill="#444">{escape(unit)}</text>')
    parts.extend(body)
    parts.append("</svg>")
    return "".join(parts)


def _label(i: int, text: str) -> str:
    y = _TOP + i * _ROW + _ROW / 2 + 4
    return f'<text class="label" x="{_LEFT - 8}" y="{y:.1f}" text-anchor="end" font-size="12">{escape(text)}</text>'


def latency_plot(items: Sequence[Interval], unit: str = "ms per run (log scale)") -> str:
    """Median (dot) with p10-p90 whiskers per item, on a log x axis."""
    values = [v for it in items for v in (it.median, it.p10, it.p90) if v > 0]
    axis = _LogAxis(min(values, default=1e-3), max(values, default=1.0))
    body = []
    for i, it in enumerate(items):
        y = _TOP + i * _ROW + _ROW / 2
        x0, x1, xm = axis.x(it.p10), axis.x(it.p90), axis.x(it.median)
        tip = f"{it.label}: median {_fmt(it.median)} ms, p10 {_fmt(it.p10)}, p90 {_fmt(it.p90)}"
        body.append(f'<g class="row" data-label="{escape(it.label)}">{_label(i, it.label)}'
                    f'<line class="whisker" x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="{_INK}" '
                    f'stroke-width="2"><title>{escape(tip)}</title></line>'
                    f'<line class="cap" x1="{x0:.1f}" y1="{y - 5:.1f}" x2="{x0:.1f}" y2="{y + 5:.1f}" stroke="{_INK}"/>'
                    f'<line class="cap" x1="{x1:.1f}" y1="{y - 5:.1f}" x2="{x1:.1f}" y2="{y + 5:.1f}" stroke="{_INK}"/>'
                    f'<circle class="median" cx="{xm:.1f}" cy="{y:.1f}" r="5" fill="{_INK}">'
                    f"<title>{escape(tip)}</title></circle>"
                    f'<text class="value" x="{_WIDTH - _RIGHT + 6}" y="{y + 4:.1f}" font-size="11">'
                    f"{_fmt(it.median)}</text></g>")
    return _frame("plot-latency", len(items), "latency: median, whiskers p10-p90", body, _tick_marks(axis), unit)


def _tick_marks(axis: _LogAxis) -> list[tuple[float, str]]:
    """Decades, and 2 and 5 between them when the axis spans at most two decades."""
    values = list(axis.ticks)
    if len(values) <= 3:
        values += [d * m for d in axis.ticks[:-1] for m in (2, 5)]
    return [(axis.x(t), f"{t:g}") for t in sorted(values)]


def bar_plot(items: Sequence[tuple[str, float]], unit: str, cls: str = "plot-compile",
             title: str = "compile time") -> str:
    """One horizontal bar per item on a linear x axis from 0, the value printed beside it."""
    top = max((v for _, v in items), default=1.0) or 1.0
    step = _nice_step(top)
    end = step * math.ceil(top / step)
    span = _WIDTH - _LEFT - _RIGHT

    def x(v: float) -> float:
        return _LEFT + v / end * span

    body = []
    for i, (label, v) in enumerate(items):
        y = _TOP + i * _ROW + 4
        body.append(f'<g class="row" data-label="{escape(label)}">{_label(i, label)}'
                    f'<rect class="bar" x="{_LEFT}" y="{y}" width="{max(x(v) - _LEFT, 1.0):.1f}" '
                    f'height="{_ROW - 8}" fill="{_INK}"><title>{escape(label)}: {_fmt(v)} {escape(unit)}</title>'
                    f'</rect><text class="value" x="{max(x(v), _LEFT + 1) + 6:.1f}" y="{y + _ROW / 2 + 1:.1f}" '
                    f'font-size="11">{_fmt(v)}</text></g>')
    n = round(end / step)
    ticks = [(x(k * step), f"{k * step:g}") for k in range(n + 1)]
    return _frame(cls, len(items), title, body, ticks, unit)


def _nice_step(top: float) -> float:
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def threshold_plot(items: Sequence[Threshold], unit: str, cls: str, title: str) -> str:
    """Each item's value (dot: green when its verdict is ok, red when not) and its limit
    (a vertical tick), on a log x axis; zero sits at the axis start, ∞ at its end."""
    pos = [v for it in items for v in (it.value, it.limit) if v is not None and v > 0]
    axis = _LogAxis(min(pos, default=1e-9), max(pos, default=1.0) * 2)  # room right of the largest limit
    body = []
    for i, it in enumerate(items):
        y = _TOP + i * _ROW + _ROW / 2
        color = _OK if it.ok else _BAD
        if it.value is None:
            xv, shown = float(_WIDTH - _RIGHT), "∞"
        else:
            xv, shown = axis.x(it.value) if it.value > 0 else float(_LEFT), _fmt(it.value)
        xl = axis.x(it.limit) if it.limit > 0 else float(_LEFT)
        tip = f"{it.label}: {shown} (limit {_fmt(it.limit)}; verdict {'ok' if it.ok else 'not ok'})"
        body.append(f'<g class="row" data-label="{escape(it.label)}" data-ok="{str(it.ok).lower()}">'
                    f"{_label(i, it.label)}"
                    f'<line class="limit" x1="{xl:.1f}" y1="{y - 8:.1f}" x2="{xl:.1f}" y2="{y + 8:.1f}" '
                    f'stroke="#888" stroke-width="3"><title>limit {_fmt(it.limit)}</title></line>'
                    f'<circle class="value-dot" cx="{xv:.1f}" cy="{y:.1f}" r="5" fill="{color}">'
                    f"<title>{escape(tip)}</title></circle>"
                    f'<text class="value" x="{_WIDTH - _RIGHT + 6}" y="{y + 4:.1f}" font-size="11">{shown}</text></g>')
    return _frame(cls, len(items), title, body, _tick_marks(axis), unit)


def curve_plot(label: str, points: Sequence[tuple[int, float]], unit: str = "estimated ms") -> str:
    """A tuning curve: best latency found (y, linear from 0) against trials (x, linear from 0),
    one point per ``(trials, ms)`` pair in order, joined by a step line (the best so far
    only falls). Each point has a ``<title>`` with its numbers."""
    height, bottom, left = 200, 170, 70
    top_x = max((t for t, _ in points), default=1) or 1
    top_y = max((v for _, v in points), default=1.0) or 1.0
    sx, sy = _nice_step(top_x), _nice_step(top_y)
    end_x, end_y = sx * math.ceil(top_x / sx), sy * math.ceil(top_y / sy)

    def x(t: float) -> float:
        return left + t / end_x * (_WIDTH - left - _RIGHT)

    def y(v: float) -> float:
        return bottom - v / end_y * (bottom - _TOP)

    title = f"tuning curve of {label}"
    parts = [(f'<svg class="plot plot-curve" data-label="{escape(label)}" width="{_WIDTH}" height="{height}" '
             f'viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'),
             f'<line class="axis" x1="{left}" y1="{bottom}" x2="{_WIDTH - _RIGHT}" y2="{bottom}" stroke="#555"/>',
             f'<line class="axis" x1="{left}" y1="{_TOP}" x2="{left}" y2="{bottom}" stroke="#555"/>']
    for k in range(round(end_x / sx) + 1):
        parts.append(f'<text class="tick" x="{x(k * sx):.1f}" y="{bottom + 14}" text-anchor="middle" '
                     f'font-size="11">{k * sx:g}</text>')
    for k in range(round(end_y / sy) + 1):
        parts.append(f'<line class="grid" x1="{left}" y1="{y(k * sy):.1f}" x2="{_WIDTH - _RIGHT}" '
                     f'y2="{y(k * sy):.1f}" stroke="#eee"/><text class="tick" x="{left - 6}" '
                     f'y="{y(k * sy) + 4:.1f}" text-anchor="end" font-size="11">{_fmt(k * sy)}</text>')
    path = [f"M{x(t):.1f},{y(v):.1f}" if i == 0 else f"H{x(t):.1f}V{y(v):.1f}" for i, (t, v) in enumerate(points)]
    if path:
        parts.append(f'<path class="curve" d="{" ".join(path)}" fill="none" stroke="{_INK}" stroke-width="2"/>')
    for t, v in points:
        parts.append(f'<circle class="point" cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{_INK}">'
                     f"<title>{escape(label)}: {_fmt(v)} ms after {t} trial(s)</title></circle>")
    parts.append(f'<text x="{(left + _WIDTH - _RIGHT) / 2:.0f}" y="{bottom + 28}" text-anchor="middle" '
                 f'font-size="11" fill="#444">trials; y: {escape(unit)}</text></svg>')
    return "".join(parts)
