"""Small charts drawn on the server as SVG, for the SLA dashboard.

No JavaScript and no CDN: a series goes in, escaped SVG markup comes out. The
Content-Security-Policy forbids inline styles, so colours come from classes in
static/baton.css (`chart-…`), never from a style attribute. Each chart is one
image to assistive technology (role="img" with an aria-label summary); every bar
carries a <title> with its exact number, and the pages put the same numbers in a
table beside the chart, so nobody needs the picture to read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

# The drawing's own coordinates; CSS scales it to the card's width.
WIDTH = 320
HEIGHT = 120
AXIS = 14  # room under the columns for the first and last labels
ROW = 22  # height of one row of a span chart


@dataclass(frozen=True)
class Part:
    """One stacked piece of a column: its size, its class (colour) and what it is."""

    value: float
    css_class: str
    title: str


@dataclass(frozen=True)
class Column:
    label: str
    parts: tuple[Part, ...]

    @property
    def total(self) -> float:
        return sum(part.value for part in self.parts)


@dataclass(frozen=True)
class Span:
    """One row of a span chart: a median bar and a 95th percentile bar under a label."""

    label: str
    median: float
    p95: float


def columns(*, points: Sequence[Column], label: str) -> SafeString:
    """Draw `points` as stacked columns left to right (days, oldest first)."""
    if not points:
        return format_html('<svg class="chart" role="img" aria-label="{}"></svg>', label)
    # A count is never below zero; a bar is never drawn inside out.
    top = max((point.total for point in points), default=0) or 1
    plot = HEIGHT - AXIS
    width = WIDTH / len(points)
    rects = []
    for index, point in enumerate(points):
        bottom = float(plot)
        for part in point.parts:
            height = plot * max(part.value, 0) / top
            bottom -= height
            rects.append(
                (
                    f"{index * width + 1:.1f}",
                    f"{bottom:.1f}",
                    f"{max(width - 2, 1):.1f}",
                    f"{height:.1f}",
                    part.css_class,
                    f"{point.label}: {part.title}",
                )
            )
    bars = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" class="{}"><title>{}</title></rect>',
        rects,
    )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">'
        '<line x1="0" y1="{}" x2="{}" y2="{}" class="chart-axis"></line>{}'
        '<text x="0" y="{}" class="chart-label">{}</text>'
        '<text x="{}" y="{}" class="chart-label" text-anchor="end">{}</text>'
        '<text x="2" y="10" class="chart-label">max {}</text>'
        "</svg>",
        WIDTH,
        HEIGHT,
        label,
        plot,
        WIDTH,
        plot,
        bars,
        HEIGHT - 2,
        points[0].label,
        WIDTH,
        HEIGHT - 2,
        points[-1].label,
        _number(top),
    )


def spans(*, rows: Sequence[Span], label: str, unit: str) -> SafeString:
    """Draw each row's median and 95th percentile as two horizontal bars on one scale."""
    if not rows:
        return format_html('<svg class="chart" role="img" aria-label="{}"></svg>', label)
    top = max(max(row.p95, row.median, 0) for row in rows) or 1
    left = WIDTH * 0.35
    room = WIDTH - left - 40
    height = ROW * len(rows) + 4
    parts = []
    for index, row in enumerate(rows):
        y = index * ROW + 2
        parts.append(
            format_html(
                '<text x="{}" y="{}" class="chart-label" text-anchor="end">{}</text>'
                '<rect x="{}" y="{}" width="{}" height="8" class="chart-p50">'
                "<title>{}: median {} {}</title></rect>"
                '<rect x="{}" y="{}" width="{}" height="8" class="chart-p95">'
                "<title>{}: 95th percentile {} {}</title></rect>"
                '<text x="{}" y="{}" class="chart-label">{} {}</text>',
                f"{left - 4:.1f}",
                y + 13,
                row.label,
                f"{left:.1f}",
                y + 1,
                f"{room * max(row.median, 0) / top:.1f}",
                row.label,
                _number(row.median),
                unit,
                f"{left:.1f}",
                y + 10,
                f"{room * max(row.p95, 0) / top:.1f}",
                row.label,
                _number(row.p95),
                unit,
                f"{left + room * max(row.p95, 0) / top + 3:.1f}",
                y + 17,
                _number(row.p95),
                unit,
            )
        )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">{}</svg>',
        WIDTH,
        height,
        label,
        format_html_join("", "{}", ((part,) for part in parts)),
    )


def _number(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))
