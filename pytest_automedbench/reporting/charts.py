"""The report's charts as inline SVG and HTML bars: crisp at any width, inside the one page, and
drawn in milliseconds (the report is written after the last test, so it must be quick).

Rules the charts keep: legends sit outside the plot (never over a bar); a value that is not known
is drawn as "unknown" or left out with a mark, never as 0; every mark has a tooltip (<title>).
"""
from __future__ import annotations

import html
import math
from typing import Sequence

#: series colours (Okabe-Ito, distinguishable with colour-vision deficiencies)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def legend(labels: Sequence[str]) -> str:
    items = "".join(f"<span class='key'><i style='background:{colour(i)}'></i>{_e(label)}</span>"
                    for i, label in enumerate(labels))
    return f"<div class='legend'>{items}</div>"


def _y_grid(left: float, right: float, top: float, plot_h: float, y_max: float) -> str:
    """Five horizontal grid lines with their values, 0 to y_max."""
    out = []
    for t in range(5):
        y = top + plot_h - plot_h * t / 4
        out.append(f"<line class='grid' x1='{left}' x2='{right}' y1='{y:.1f}' y2='{y:.1f}'/>"
                   f"<text class='tick' x='{left - 4}' y='{y + 3:.1f}' text-anchor='end'>{y_max * t / 4:g}</text>")
    return "".join(out)


def grouped_bars(categories: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]],
                 y_max: float = 100.0, y_label: str = "%") -> str:
    """Vertical bars per category, one per series; the legend above the plot; None = no bar, "n/a"."""
    w, h, left, bottom, top = 640, 240, 40, 26, 12
    plot_w, plot_h = w - left - 8, h - bottom - top
    n = max(1, len(series))
    group = plot_w / max(1, len(categories))
    bar = min(36.0, group * 0.8 / n)
    parts = [f"<svg class='chart' viewBox='0 0 {w} {h}' role='img' aria-label='{_e(y_label)}'>",
             _y_grid(left, w - 8, top, plot_h, y_max)]
    for ci, cat in enumerate(categories):
        x0 = left + ci * group + (group - bar * n) / 2
        parts.append(f"<text class='tick' x='{left + ci * group + group / 2:.1f}' y='{h - 8}' "
                     f"text-anchor='middle'>{_e(cat)}</text>")
        for si, (label, values) in enumerate(series):
            v = values[ci] if ci < len(values) else None
            x = x0 + si * bar
            if v is None:
                parts.append(f"<text class='na' x='{x + bar / 2:.1f}' y='{top + plot_h - 3}' text-anchor='middle'>"
                             f"n/a<title>{_e(label)} {_e(cat)}: not known</title></text>")
                continue
            bh = plot_h * max(0.0, min(v, y_max)) / y_max
            parts.append(f"<rect x='{x + 1:.1f}' y='{top + plot_h - bh:.1f}' width='{max(1.0, bar - 2):.1f}' "
                         f"height='{bh:.1f}' fill='{colour(si)}'><title>{_e(label)} {_e(cat)}: {v:.1f}</title></rect>")
            if n <= 4:
                parts.append(f"<text class='val' x='{x + bar / 2:.1f}' y='{top + plot_h - bh - 3:.1f}' "
                             f"text-anchor='middle'>{v:.0f}</text>")
    parts.append(f"<line class='axis' x1='{left}' x2='{w - 8}' y1='{top + plot_h}' y2='{top + plot_h}'/></svg>")
    return legend([s[0] for s in series]) + "".join(parts)


def _ticks(hi: float) -> list[float]:
    """About five round ticks from 0 to at least hi."""
    if hi <= 0:
        return [0.0, 1.0]
    raw = hi / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    return [round(i * step, 10) for i in range(math.ceil(hi / step - 1e-9) + 1)]


def scatter(points: Sequence[tuple[float | None, float, int, str]], series: Sequence[str], x_label: str,
            y_label: str = "Overall (0-100)", y_max: float = 100.0, x_format: str = "{:g}",
            lane_label: str = "unknown") -> str:
    """Points (x, y, series index, tooltip); x None goes into a lane right of the axis, named
    `lane_label` (up to two words a line), off the x axis: a value not known is never drawn at 0."""
    w, h, left, bottom, top = 640, 260, 44, 40, 12
    unknown = [p for p in points if p[0] is None]
    known = [p for p in points if p[0] is not None]
    lane = 84 if unknown else 0
    plot_w, plot_h = w - left - 22 - lane, h - bottom - top  # room for the last tick's label
    ticks = _ticks(max((p[0] for p in known), default=0.0))
    x_hi = ticks[-1] or 1.0
    parts = [f"<svg class='chart' viewBox='0 0 {w} {h}' role='img' aria-label='{_e(y_label)} against {_e(x_label)}'>",
             _y_grid(left, left + plot_w, top, plot_h, y_max)]
    if known:
        for v in ticks:
            x = left + plot_w * v / x_hi
            parts.append(f"<line class='grid' x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{top + plot_h}'/>"
                         f"<text class='tick' x='{x:.1f}' y='{top + plot_h + 13}' text-anchor='middle'>"
                         f"{_e(x_format.format(v))}</text>")
    else:
        parts.append(f"<text class='na' x='{left + plot_w / 2:.1f}' y='{top + plot_h / 2:.1f}' text-anchor='middle'>"
                     f"no run with a known {_e(x_label)}</text>")
    parts.append(f"<text class='label' x='{left + plot_w / 2:.1f}' y='{h - 6}' text-anchor='middle'>{_e(x_label)}</text>"
                 f"<text class='label' transform='translate(11 {top + plot_h / 2:.1f}) rotate(-90)' "
                 f"text-anchor='middle'>{_e(y_label)}</text>")
    if unknown:
        lx = left + plot_w + 12
        words = lane_label.split()
        lines = [" ".join(words[i:i + 2]) for i in range(0, len(words), 2)]
        cx = lx + (lane - 4) / 2
        label = "".join(f"<tspan x='{cx:.1f}' dy='{0 if k == 0 else 11}'>{_e(line)}</tspan>"
                        for k, line in enumerate(lines))
        parts.append(f"<rect class='lane' x='{lx}' y='{top}' width='{lane - 4}' height='{plot_h}'>"
                     f"<title>{len(unknown)} run(s): {_e(lane_label)}</title></rect>"
                     f"<text class='tick lane-label' x='{cx:.1f}' y='{top + plot_h + 13}' "
                     f"text-anchor='middle'>{label}</text>")
    for i, (x, y, si, tip) in enumerate(points):
        cy = top + plot_h - plot_h * max(0.0, min(float(y), y_max)) / y_max
        if x is None:
            cx = left + plot_w + 12 + 8 + (i * 7.3) % (lane - 20)  # spread within the lane, not stacked
        else:
            cx = left + plot_w * float(x) / x_hi
        parts.append(f"<circle cx='{cx:.1f}' cy='{cy:.1f}' r='4.5' fill='{colour(si)}' class='pt'>"
                     f"<title>{_e(tip)}</title></circle>")
    parts.append(f"<line class='axis' x1='{left}' x2='{left + plot_w}' y1='{top + plot_h}' y2='{top + plot_h}'/>"
                 f"<line class='axis' x1='{left}' x2='{left}' y1='{top}' y2='{top + plot_h}'/></svg>")
    return legend(series) + "".join(parts)


def hbars(rows: Sequence[tuple[str, float | None, str, str]], scale: float = 1.0) -> str:
    """Horizontal HTML bars: (label, value 0..scale or None = unknown, CSS class, text shown after the bar)."""
    out = []
    for label, value, cls, text in rows:
        if value is None:
            bar = "<span class='hbar-na'>unknown</span>"
        else:
            pct = 100 * max(0.0, min(value, scale)) / scale
            bar = f"<span class='hbar-fill {_e(cls)}' style='width:{pct:.1f}%'></span>"
        out.append(f"<div class='hbar'><span class='hbar-label' title='{_e(label)}'>{_e(label)}</span>"
                   f"<span class='hbar-track'>{bar}</span><span class='hbar-text'>{_e(text)}</span></div>")
    return "<div class='hbars'>" + "".join(out) + "</div>"


def grouped_hbars(rows: Sequence[tuple[str, Sequence[float | None]]], series: Sequence[str], scale: float = 1.0) -> str:
    """Per category a thin bar for each series (series colours, legend above): compares series at a glance."""
    out = [legend(series), "<div class='hbars'>"]
    for label, values in rows:
        bars = []
        for i, v in enumerate(values):
            if v is None:
                bars.append(f"<div class='row'><span class='hbar-na'>unknown</span><span class='v'>?</span></div>")
                continue
            pct = 100 * max(0.0, min(v, scale)) / scale
            bars.append(f"<div class='row' title='{_e(series[i])}: {100 * v:.0f}%'><span class='track'>"
                        f"<i style='width:{pct:.1f}%;background:{colour(i)}'></i></span>"
                        f"<span class='v'>{100 * v:.0f}%</span></div>")
        out.append(f"<div class='hgroup'><span class='hbar-label'>{_e(label)}</span><div class='bars'>{''.join(bars)}"
                   "</div></div>")
    return "".join(out) + "</div>"
