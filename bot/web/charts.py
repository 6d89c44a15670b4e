"""Charts drawn on the server as SVG: stacked bars per day, one colour per series, each bar
with a ``<title>`` that names the day, the series and the value (a hover tooltip, and what a
screen reader or a test reads). No script and no style attribute, so the page's
Content-Security-Policy holds; every label is escaped."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH = 720
HEIGHT = 240
MARGIN_LEFT = 56
MARGIN_BOTTOM = 28
MARGIN_TOP = 12
PALETTE = ("#3b6ea8", "#d07a2a", "#4a9a5b", "#b8474f", "#7a5aa8", "#8c6d3f", "#c2569d", "#5f6b73")


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: str


def color_of(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def stacked_bars(
    days: list[str], series: dict[str, list[float]], unit: str, fmt: str = "{:,.0f}"
) -> Markup:
    """One bar per day, stacked by series (in the dict's order); empty days draw nothing."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(days))]
    top = max(totals, default=0) or 1
    plot_w = WIDTH - MARGIN_LEFT - 8
    plot_h = HEIGHT - MARGIN_BOTTOM - MARGIN_TOP
    step = plot_w / max(len(days), 1)
    bar_w = max(step * 0.7, 1)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(unit)} per day">',
        _axis(top, unit, fmt, plot_h),
    ]
    for i, day in enumerate(days):
        x = MARGIN_LEFT + i * step + (step - bar_w) / 2
        y = float(MARGIN_TOP + plot_h)
        for index, (name, values) in enumerate(series.items()):
            value = values[i]
            if value <= 0:
                continue
            h = value / top * plot_h
            y -= h
            tip = f"{day} · {name}: {fmt.format(value)} {unit}".rstrip()
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{color_of(index)}"><title>{escape(tip)}</title></rect>'
            )
        if len(days) <= 14 or i % max(len(days) // 10, 1) == 0:
            parts.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle" '
                f'font-size="11">{escape(day[5:])}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def _axis(top: float, unit: str, fmt: str, plot_h: float) -> str:
    bottom = MARGIN_TOP + plot_h
    return (
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{bottom}" '
        'stroke="#888"/>'
        f'<line x1="{MARGIN_LEFT}" y1="{bottom}" x2="{WIDTH - 8}" y2="{bottom}" stroke="#888"/>'
        f'<text x="{MARGIN_LEFT - 4}" y="{MARGIN_TOP + 10}" text-anchor="end" font-size="11">'
        f"{escape(fmt.format(top))}</text>"
        f'<text x="{MARGIN_LEFT - 4}" y="{bottom}" text-anchor="end" font-size="11">0</text>'
        f'<text x="4" y="{MARGIN_TOP + plot_h / 2:.0f}" font-size="11">{escape(unit)}</text>'
    )
