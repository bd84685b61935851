"""The SLA dashboard's pictures: its series handed to approvals.console.charts, with a summary
in words for each one (the chart's aria-label), so the numbers reach everyone."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.safestring import SafeString

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
    return board.days[index].strftime("%b %-d")


def sla_charts(board: Dashboard) -> SlaCharts:
    """Draw the dashboard's charts from what `board` read (no query)."""
    window = f"{_day(board, 0)} to {_day(board, -1)}"
    total = sum(day.count for day in board.decisions_per_day)
    busiest = max(board.decisions_per_day, key=lambda day: day.count, default=None)
    decisions = charts.columns(
        points=[
            charts.Column(
                label=day.day.strftime("%b %-d"),
                parts=(charts.Part(day.count, "chart-decisions", f"{day.count} decisions"),),
            )
            for day in board.decisions_per_day
        ],
        label=f"Decisions per day, {window}: {total} in all"
        + (
            f", at most {busiest.count} on {busiest.day:%b %-d}."
            if busiest and busiest.count
            else "."
        ),
    )
    runs = [
        TrendChart(
            trend=trend,
            svg=charts.columns(
                points=[
                    charts.Column(
                        label=day.day.strftime("%b %-d"),
                        parts=(
                            charts.Part(day.succeeded, "chart-ok", f"{day.succeeded} succeeded"),
                            charts.Part(day.failures, "chart-bad", f"{day.failures} failed"),
                        ),
                    )
                    for day in trend.days
                ],
                label=(
                    f"{trend.workflow_type}: {trend.total.finished} runs finished, "
                    f"{trend.total.failures} of them failed ({trend.failure_rate}%), {window}."
                ),
            ),
        )
        for trend in board.run_trends
    ]
    decision_times = charts.spans(
        rows=[
            charts.Span(label=row.workflow_type, median=row.median_hours, p95=row.p95_hours)
            for row in board.latency
        ],
        label="Time to a decision in hours, last 7 days: "
        + (
            "; ".join(
                f"{row.workflow_type} median {row.median_hours}, 95th percentile {row.p95_hours}"
                for row in board.latency
            )
            or "no decisions."
        ),
        unit="h",
    )
    cycle_times = charts.spans(
        rows=[
            charts.Span(label=row.workflow_type, median=row.median_hours, p95=row.p95_hours)
            for row in board.cycle_times
        ],
        label=f"Run cycle time in hours, runs finished {window}: "
        + (
            "; ".join(
                f"{row.workflow_type} median {row.median_hours}, 95th percentile {row.p95_hours}"
                for row in board.cycle_times
            )
            or "no runs finished."
        ),
        unit="h",
    )
    return SlaCharts(
        decisions=decisions, decision_times=decision_times, runs=runs, cycle_times=cycle_times
    )
