"""The SLA dashboard's pictures: its series handed to approvals.console.charts, with a summary
in words for each one (the chart's aria-label), so the numbers reach everyone."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.utils import formats
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from approvals.console import charts
from approvals.console.sla import Dashboard, RunTrend


@dataclass(frozen=True)
class TrendChart:
    trend: RunTrend
    svg: SafeString


@dataclass
class SlaCharts:
    decisions: SafeString
    decision_times: SafeString
    cycle_times: SafeString
    runs: list[TrendChart] = field(default_factory=list)


def _day(board: Dashboard, index: int) -> str:
    return _short(board.days[index])


def _short(day: date) -> str:
    """A day as "Dec 6" in English, "6. Dez." in German."""
    return formats.date_format(day, _("M j"))


def sla_charts(board: Dashboard) -> SlaCharts:
    """Draw the dashboard's charts from what `board` read (no query)."""
    window = _("%(first)s to %(last)s") % {"first": _day(board, 0), "last": _day(board, -1)}
    total = sum(day.count for day in board.decisions_per_day)
    busiest = max(board.decisions_per_day, key=lambda day: day.count, default=None)
    decisions = charts.columns(
        points=[
            charts.Column(
                label=_short(day.day),
                parts=(
                    charts.Part(
                        day.count,
                        "chart-decisions",
                        ngettext("%(count)d decision", "%(count)d decisions", day.count)
                        % {"count": day.count},
                    ),
                ),
            )
            for day in board.decisions_per_day
        ],
        label=(
            _("Decisions per day, %(window)s: %(total)s in all, at most %(most)s on %(day)s.")
            % {
                "window": window,
                "total": total,
                "most": busiest.count,
                "day": _short(busiest.day),
            }
            if busiest and busiest.count
            else _("Decisions per day, %(window)s: %(total)s in all.")
            % {"window": window, "total": total}
        ),
    )
    runs = [
        TrendChart(
            trend=trend,
            svg=charts.columns(
                points=[
                    charts.Column(
                        label=_short(day.day),
                        parts=(
                            charts.Part(
                                day.succeeded,
                                "chart-ok",
                                _("%(count)s succeeded") % {"count": day.succeeded},
                            ),
                            charts.Part(
                                day.failures,
                                "chart-bad",
                                _("%(count)s failed") % {"count": day.failures},
                            ),
                        ),
                    )
                    for day in trend.days
                ],
                label=_(
                    "%(type)s: %(finished)s runs finished, %(failed)s of them failed"
                    " (%(rate)s%%), %(window)s."
                )
                % {
                    "type": trend.workflow_type,
                    "finished": trend.total.finished,
                    "failed": trend.total.failures,
                    "rate": trend.failure_rate,
                    "window": window,
                },
            ),
        )
        for trend in board.run_trends
    ]
    decision_times = charts.spans(
        rows=[
            charts.Span(label=row.workflow_type, median=row.median_hours, p95=row.p95_hours)
            for row in board.latency
        ],
        label=_("Time to a decision in hours, last 7 days: %(rows)s")
        % {"rows": _spans_in_words(board.latency) or _("no decisions.")},
        unit="h",
    )
    cycle_times = charts.spans(
        rows=[
            charts.Span(label=row.workflow_type, median=row.median_hours, p95=row.p95_hours)
            for row in board.cycle_times
        ],
        label=_("Run cycle time in hours, runs finished %(window)s: %(rows)s")
        % {"window": window, "rows": _spans_in_words(board.cycle_times) or _("no runs finished.")},
        unit="h",
    )
    return SlaCharts(
        decisions=decisions, decision_times=decision_times, runs=runs, cycle_times=cycle_times
    )


def _spans_in_words(rows: Any) -> str:
    return "; ".join(
        _("%(type)s median %(median)s, 95th percentile %(p95)s")
        % {"type": row.workflow_type, "median": row.median_hours, "p95": row.p95_hours}
        for row in rows
    )
