"""The figures the suite reports, their targets, and the table and JSON they are written as.

`CATALOGUE` lists every figure once: what it is, its unit, its target and the
group that measures it. A group returns `Result`s by key; the report shows every
catalogued figure, marking the ones a group failed to produce, so a missing
figure is visible rather than silently dropped.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class Target:
    """A limit on the figure itself (`on="value"`) or on figure ÷ baseline (`on="ratio"`)."""

    limit: float
    on: Literal["value", "ratio"] = "value"
    direction: Literal["max", "min", "equal"] = "max"
    unit: str = ""

    def met(self, value: float | None, ratio: float | None) -> bool | None:
        measured = value if self.on == "value" else ratio
        if measured is None or math.isnan(measured):
            return None
        if self.direction == "max":
            return measured <= self.limit
        if self.direction == "min":
            return measured >= self.limit
        return measured == self.limit

    def __str__(self) -> str:
        sign = {"max": "≤", "min": "≥", "equal": "="}[self.direction]
        suffix = "x" if self.on == "ratio" else (f" {self.unit}" if self.unit else "")
        return f"{sign} {_number(self.limit)}{suffix}"


@dataclass(frozen=True)
class Spec:
    key: str
    group: str
    what: str
    unit: str
    baseline_what: str = ""
    target: Target | None = None
    # False where figure ÷ baseline means nothing (a count beside another count).
    ratio: bool = True


@dataclass
class Result:
    """One measured figure, as a group returns it."""

    key: str
    value: float | None
    baseline: float | None = None
    note: str = ""
    samples: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _spec(*args: Any, **kwargs: Any) -> tuple[str, Spec]:
    spec = Spec(*args, **kwargs)
    return spec.key, spec


COMMIT = "commit round trip"
CATALOGUE: dict[str, Spec] = dict(
    [
        # -- the engine in-process (Celery's memory:// broker) ----------------
        _spec("commit_round_trip_ms", "engine", "raw PostgreSQL commit round trip, p50", "ms"),
        _spec("commits_per_start", "engine", "commits per start", "", target=Target(1)),
        _spec("statements_per_start", "engine", "statements per start", ""),
        _spec("round_trips_per_start", "engine", "database round trips per start", ""),
        _spec("commits_per_remote_step", "engine", "commits per remote step", "", target=Target(2)),
        _spec(
            "statements_per_remote_step",
            "engine",
            "statements per remote step",
            "",
            target=Target(5),
        ),
        _spec("round_trips_per_remote_step", "engine", "database round trips per remote step", ""),
        _spec("commits_per_local_step", "engine", "commits per local step", "", target=Target(1)),
        _spec(
            "statements_per_local_step", "engine", "statements per local step", "", target=Target(5)
        ),
        _spec("round_trips_per_local_step", "engine", "database round trips per local step", ""),
        _spec(
            "step_in_process_ms",
            "engine",
            "remote step in-process, p50",
            "ms",
            COMMIT,
            Target(3, on="ratio"),
        ),
        _spec(
            "local_step_in_process_ms",
            "engine",
            "local step in-process, p50",
            "ms",
            COMMIT,
            Target(2, on="ratio"),  # the figure (hotpath): a local step ≤ 2x a commit
        ),
        _spec("step_cpu_ms", "engine", "remote step in-process, CPU of this process, p50", "ms"),
        _spec(
            "local_step_cpu_ms", "engine", "local step in-process, CPU of this process, p50", "ms"
        ),
        _spec(
            "start_p50_ms", "engine", "start in-process, p50", "ms", COMMIT, Target(2, on="ratio")
        ),
        # -- DBOS Transact in-process, on the same server (bench/dbos_engine.py) --
        _spec("dbos_step_in_process_ms", "dbos", "DBOS step in-process, p50", "ms"),
        _spec("dbos_start_p50_ms", "dbos", "DBOS start in-process, p50", "ms"),
        _spec(
            "step_vs_dbos_ms",
            "dbos",
            "Baton's remote step in-process vs DBOS's step",
            "ms",
            "DBOS step",
            Target(0.7, on="ratio"),
        ),
        _spec(
            "start_vs_dbos_ms",
            "dbos",
            "Baton's start in-process vs DBOS's start",
            "ms",
            "DBOS start",
            Target(0.7, on="ratio"),
        ),
        _spec(
            "long_run_step_ms",
            "long",
            "step at the end of a long run vs near its start",
            "ms",
            "near the start",
            Target(1.1, on="ratio"),
        ),
        _spec(
            "map_item_statements",
            "map",
            "statements per map item, long list vs 10 items",
            "",
            "10 items",
            Target(1.0, on="ratio"),
        ),
        _spec(
            "map_item_ms",
            "map",
            "map item in-process, long list vs 10 items, p50",
            "ms",
            "10 items",
            Target(1.2, on="ratio"),
        ),
        # -- through Celery, 2 worker processes ---------------------------------
        _spec("celery_round_trip_ms", "celery", "raw Celery round trip, p50", "ms"),
        _spec(
            "step_via_celery_ms",
            "celery",
            "step via Celery (10-step run ÷ 10), p50",
            "ms",
            "raw chain of 10 ÷ 10",
            Target(1.3, on="ratio"),
        ),
        _spec(
            "step_via_celery_no_eager_ms",
            "celery",
            "the same, every step a message (no eager dispatch)",
            "ms",
            "raw chain of 10 ÷ 10",
            # Issue 20's target: 1.3x with eager dispatch, 2x with every step a message.
            Target(2.0, on="ratio"),
        ),
        _spec(
            "e2e3_p50_ms",
            "celery",
            "3-step workflow end to end, p50",
            "ms",
            "raw chain of 3",
            Target(12, unit="ms"),
        ),
        _spec(
            "e2e3_p99_ms",
            "celery",
            "3-step workflow end to end, p99",
            "ms",
            "raw chain of 3",
            Target(30, unit="ms"),
        ),
        _spec(
            "throughput_per_s",
            "celery",
            "3-step workflows per second",
            "/s",
            "raw chains of 3",
            Target(0.8, on="ratio", direction="min"),
        ),
        _spec(
            "throughput_no_eager_per_s",
            "celery",
            "the same, every step a message (no eager dispatch)",
            "/s",
            "raw chains of 3",
            Target(0.8, on="ratio", direction="min"),
        ),
        # -- the sweep ---------------------------------------------------------
        _spec("sweep_small_s", "sweep", "sweep of the due timers, few waiting runs", "s"),
        _spec(
            "sweep_large_s",
            "sweep",
            "sweep of the same due timers, many waiting runs",
            "s",
            "few waiting runs",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "timers_per_run_per_s",
            "sweep",
            "the same, each timer fired the per-run way (set path off)",
            "/s",
        ),
        _spec(
            "timers_per_s",
            "sweep",
            "due timers fired per second, many waiting runs",
            "/s",
            "the per-run way",
            target=Target(5000, direction="min", unit="/s"),
        ),
        # -- the inbox (gunicorn, 8 concurrent connections) --------------------
        _spec("bare_rps", "inbox", "bare 25-row page, requests per second (many tasks)", "/s"),
        _spec(
            "inbox_p50_small_ms", "inbox", "inbox first page p50, few tasks", "ms", "bare page p50"
        ),
        _spec(
            "inbox_p95_small_ms", "inbox", "inbox first page p95, few tasks", "ms", "bare page p95"
        ),
        _spec("inbox_p50_large_ms", "inbox", "inbox first page p50, many tasks", "ms", "few tasks"),
        _spec(
            "inbox_p95_large_ms",
            "inbox",
            "inbox first page p95, many tasks",
            "ms",
            "few tasks",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "inbox_rps_small",
            "inbox",
            "inbox requests per second, few tasks",
            "/s",
            "bare page",
            Target(0.6, on="ratio", direction="min"),
        ),
        _spec(
            "inbox_rps_large",
            "inbox",
            "inbox requests per second, many tasks",
            "/s",
            "bare page",
            Target(0.6, on="ratio", direction="min"),
        ),
        _spec(
            "inbox_rps_small_cold",
            "inbox",
            "inbox requests per second, few tasks, row cache off",
            "/s",
            "bare page",
            Target(0.6, on="ratio", direction="min"),
        ),
        _spec(
            "inbox_rps_large_cold",
            "inbox",
            "inbox requests per second, many tasks, row cache off",
            "/s",
            "bare page",
            Target(0.6, on="ratio", direction="min"),
        ),
        _spec(
            "inbox_p95_large_cold_ms",
            "inbox",
            "inbox first page p95, many tasks, row cache off",
            "ms",
            "row cache on",
        ),
        _spec(
            "inbox_deep_p50_ms",
            "inbox",
            "inbox deep keyset page p50, many tasks",
            "ms",
            "first page",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "inbox_queries_first",
            "inbox",
            "queries per inbox page (first), beyond login",
            "",
            "bare page's",
            Target(4),
            ratio=False,
        ),
        _spec(
            "inbox_queries_deep",
            "inbox",
            "queries per inbox page (deep), beyond login",
            "",
            "bare page's",
            Target(4),
            ratio=False,
        ),
        _spec(
            "inbox_queries_queue",
            "inbox",
            "queries per inbox page (queue tab), beyond login",
            "",
            "bare page's",
            Target(4),
            ratio=False,
        ),
        # -- 8 reviewers decide one task at once ------------------------------
        _spec("decide_p50_ms", "decide", "8 reviewers deciding one task, latency p50", "ms"),
        _spec("decide_max_ms", "decide", "8 reviewers deciding one task, slowest", "ms"),
        _spec(
            "decide_winners",
            "decide",
            "reviewers whose decision won",
            "",
            target=Target(1, direction="equal"),
        ),
        _spec(
            "decide_refused",
            "decide",
            "reviewers refused with a message",
            "",
            target=Target(7, direction="equal"),
        ),
        # -- the audit export: few entries, then many (1M at full size) -------------
        _spec(
            "audit_export_rss_mb",
            "audit",
            "audit export peak memory (process RSS), many entries",
            "MB",
            "few entries",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "audit_export_heap_mb",
            "audit",
            "audit export peak Python heap (tracemalloc), many entries",
            "MB",
            "few entries",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "audit_export_per_s",
            "audit",
            "audit entries exported per second, many entries",
            "/s",
            "few entries",
        ),
        # -- scale: years of history beside a small database (opt-in: --only scale) --
        _spec(
            "scale_three_step_per_s",
            "scale",
            "3-step runs per second in-process, years of history",
            "/s",
            "small database",
            Target(1 / 1.2, on="ratio", direction="min"),
        ),
        _spec(
            "scale_start_p50_ms",
            "scale",
            "start p50, years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_inbox_first_p95_ms",
            "scale",
            "inbox first page p95 (2,000 open tasks), years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_inbox_deep_p95_ms",
            "scale",
            "inbox deep page p95 (2,000 open tasks), years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_console_by_key_p95_ms",
            "scale",
            "console runs filtered by business key p95, years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_console_search_p95_ms",
            "scale",
            "console runs searched by business key p95, years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_sla_p95_ms",
            "scale",
            "SLA dashboard p95 (operator, from beat's snapshot), years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_sla_manager_p95_ms",
            "scale",
            "SLA dashboard p95 (a group manager, from beat's snapshot), years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_sla_refresh_ms",
            "scale",
            "SLA snapshot count (beat, once a minute), years of history",
            "ms",
            "small database",
        ),
        _spec(
            "scale_sla_refresh_managed_ms",
            "scale",
            "SLA snapshot count with a manager for each of 300 groups, years of history",
            "ms",
            "small database",
        ),
        _spec(
            "scale_api_by_key_p95_ms",
            "scale",
            "GET /api/v1/workflows?correlation_id= p95, years of history",
            "ms",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_page_db_ms",
            "scale",
            "database time of the slowest page's queries (EXPLAIN ANALYZE), years of history",
            "ms",
            "small database",
        ),
        _spec(
            "scale_big_seq_scans",
            "scale",
            "sequential scans of a large table in the pages' plans, years of history",
            "",
            target=Target(0),
        ),
        _spec(
            "scale_sweep_s",
            "scale",
            "sweep of 100 due timers among the waiting runs, years of history",
            "s",
            "small database",
            Target(1.2, on="ratio"),
        ),
        _spec(
            "scale_prune_runs_per_s",
            "scale",
            "finished runs pruned per second, years of history",
            "/s",
            "small database",
            Target(5000, direction="min", unit="/s"),
        ),
        _spec("scale_prune_large_runs", "scale", "runs the measured prune deleted", ""),
    ]
)
GROUPS = ("engine", "dbos", "long", "map", "celery", "sweep", "inbox", "decide", "audit", "scale")
# Run only when asked (`--only scale`), or by the tiny profile that checks every figure.
OPT_IN = ("scale",)


def _number(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    if value == int(value) and abs(value) >= 1:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def _with_unit(value: float | None, unit: str) -> str:
    text = _number(value)
    return f"{text} {unit}" if unit and text != "—" else text


@dataclass
class Row:
    key: str
    group: str
    what: str
    figure: str
    baseline: str
    ratio: str
    target: str
    met: str
    value: float | None
    baseline_value: float | None
    ratio_value: float | None
    met_value: bool | None
    unit: str
    baseline_what: str
    note: str
    samples: int | None
    extra: dict[str, Any]


def rows(*, results: dict[str, Result], failures: dict[str, str]) -> list[Row]:
    """Return one row per catalogued figure, in catalogue order."""
    table = []
    for key, spec in CATALOGUE.items():
        result = results.get(key)
        value = result.value if result else None
        baseline = result.baseline if result else None
        ratio = value / baseline if value is not None and baseline and spec.ratio else None
        met = spec.target.met(value, ratio) if spec.target else None
        if result is None:
            figure = "not measured" if spec.group in failures else "not run"
        else:
            figure = _with_unit(value, spec.unit)
        table.append(
            Row(
                key=key,
                group=spec.group,
                what=spec.what,
                figure=figure,
                baseline=(
                    f"{_with_unit(baseline, spec.unit)} ({spec.baseline_what})"
                    if baseline is not None and spec.baseline_what
                    else _with_unit(baseline, spec.unit)
                ),
                ratio=f"{ratio:.2f}x" if ratio is not None else "—",
                target=str(spec.target) if spec.target else "—",
                met="—" if met is None else ("yes" if met else "NO"),
                value=value,
                baseline_value=baseline,
                ratio_value=ratio,
                met_value=met,
                unit=spec.unit,
                baseline_what=spec.baseline_what,
                note=result.note if result else "",
                samples=result.samples if result else None,
                extra=result.extra if result else {},
            )
        )
    return table


def render(
    table: list[Row],
    *,
    header: str = "",
    failures: dict[str, str] | None = None,
    retried: dict[str, str] | None = None,
) -> str:
    """Return the table as aligned plain text, grouped, with each figure's notes below."""
    columns = ("what", "figure", "baseline", "ratio", "target", "met")
    cells = [[row.what, row.figure, row.baseline, row.ratio, row.target, row.met] for row in table]
    widths = [
        max(len(columns[index]), *(len(line[index]) for line in cells))
        for index in range(len(columns))
    ]

    def line(values: list[str] | tuple[str, ...]) -> str:
        return "  ".join(value.ljust(width) for value, width in zip(values, widths, strict=True))

    out = [header] if header else []
    out += [line(columns), line(["-" * width for width in widths])]
    group = None
    for row, values in zip(table, cells, strict=True):
        if row.group != group:
            group = row.group
            out.append(f"[{group}]")
        out.append(line(values).rstrip())
    notes = [(row.what, row.note) for row in table if row.note]
    if notes:
        out.append("")
        out.append("notes:")
        out += [f"- {what}: {note}" for what, note in notes]
    if failures:
        out.append("")
        out.append("not measured (the logs say more):")
        out += [f"- {group}: {reason}" for group, reason in failures.items()]
    if retried:
        out.append("")
        out.append("measured on a second try, after:")
        out += [f"- {group}: {reason}" for group, reason in retried.items()]
    return "\n".join(out)


def write_json(path: Path, *, table: list[Row], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"meta": meta, "figures": {row.key: asdict(row) for row in table}}
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
