"""Baton's Prometheus metrics: what they are and how the engine and the services move them.

Every metric is named `baton_...` and labelled only with values of bounded
cardinality: the workflow type and node (both come from definitions in code),
the step's kind, a state or an outcome. Counters and histograms move only for
committed work: the engine hands `record_events` the timeline events of a use
case, and it counts them once the transaction commits (`on_commit`), so a
rolled-back use case counts nothing. Nothing here touches the database; the
gauges that need a query (due backlog, open human tasks) are read when
Prometheus scrapes (`workflows.exposition`), from indexed queries.

Under gunicorn or Celery's prefork pool, each process keeps its own values;
prometheus-client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR) adds them up at
scrape time. See README, "Metrics".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from prometheus_client import Counter, Histogram

from workflows.states import EventKind

if TYPE_CHECKING:
    from workflows.models import StepEvent, StepRun

# Seconds: from a few milliseconds (a local step) to an hour (a long activity).
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
# Seconds: a decision takes minutes to days.
_DECISION_BUCKETS = (60, 300, 900, 3600, 4 * 3600, 8 * 3600, 86400, 2 * 86400, 4 * 86400, 7 * 86400)
_SWEEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

RUNS_STARTED = Counter("baton_runs_started", "Runs started.", ["type"])
RUNS_ENDED = Counter(
    "baton_runs_ended",
    "Runs that ended, by final state (succeeded, failed, compensated, cancelled).",
    ["type", "state"],
)
STEP_ATTEMPTS = Counter(
    "baton_step_attempts", "Attempts of activities and compensations.", ["type", "node", "kind"]
)
STEP_RETRIES = Counter(
    "baton_step_retries",
    "Attempts that failed and were scheduled to retry.",
    ["type", "node", "kind"],
)
STEP_FAILURES = Counter(
    "baton_step_failures", "Steps that failed for good.", ["type", "node", "kind"]
)
COMPENSATIONS = Counter(
    "baton_compensations", "Completed steps undone by their compensation.", ["type", "node"]
)
DEAD_LETTERS = Counter(
    "baton_dead_letters", "Runs dead-lettered by a compensation that failed for good.", ["type"]
)
STEP_DURATION = Histogram(
    "baton_step_duration_seconds",
    "How long an attempt ran, from its claim to its recorded outcome.",
    ["type", "node", "kind", "outcome"],
    buckets=_STEP_BUCKETS,
)
SCHEDULE_TO_START = Histogram(
    "baton_step_schedule_to_start_seconds",
    "How long a step waited between being scheduled (or its retry falling due) and its claim.",
    ["type", "node", "kind"],
    buckets=_STEP_BUCKETS,
)
SWEEP_DURATION = Histogram(
    "baton_sweep_duration_seconds", "How long one sweep took.", buckets=_SWEEP_BUCKETS
)
DECISION_LATENCY = Histogram(
    "baton_decision_latency_seconds",
    "From a human task's opening to a person's decision.",
    ["type", "node", "outcome"],
    buckets=_DECISION_BUCKETS,
)
REPLICA_FALLBACKS = Counter(
    "baton_replica_fallbacks",
    "Reads meant for the read replica that the primary answered, the replica having failed.",
)
REPLICA_LAG_SKIPS = Counter(
    "baton_replica_lag_skips",
    "Checks that found the read replica further behind than BATON_REPLICA_MAX_LAG_SECONDS.",
)
EMAIL_LINKS = Counter(
    "baton_email_links",
    "Emailed decision links used to decide, or refused (with why).",
    ["result", "reason"],
)

_OUTCOMES = {
    EventKind.COMPLETED: "completed",
    EventKind.ERRORED: "errored",
    EventKind.CANCELLED: "cancelled",
}
_RUN_ENDINGS = {
    EventKind.COMPLETED: "succeeded",
    EventKind.FAILED: "failed",
    EventKind.COMPENSATED: "compensated",
    EventKind.CANCELLED: "cancelled",
}


def record_events(events: list[StepEvent]) -> None:
    """Count a use case's timeline events once its transaction commits.

    The events carry their run and step in memory, so counting reads nothing
    from the database. Called by the engine's unit of work for every use case.
    """
    if events:
        transaction.on_commit(lambda: count_events(events), robust=True)


def record_run_event(*, workflow_type: str, kind: EventKind, detail: dict[str, Any]) -> None:
    """Count a run's event written without an event row in memory (the straight start's)
    once its transaction commits, as `record_events` counts it."""
    transaction.on_commit(lambda: _count_run_event(workflow_type, kind, detail), robust=True)


def count_events(events: Iterable[StepEvent]) -> None:
    """Move the counters and histograms for committed events (see `record_events`)."""
    for event in events:
        workflow_type = event.run.workflow_type
        step = event.step
        kind = event.kind
        if step is None:
            _count_run_event(workflow_type, kind, event.detail)
            continue
        labels = (workflow_type, step.node, step.kind)
        if kind == EventKind.STARTED:
            STEP_ATTEMPTS.labels(*labels).inc()
            if step.scheduled_at is not None:
                SCHEDULE_TO_START.labels(*labels).observe(_seconds(step.scheduled_at, event.at))
        elif kind == EventKind.RETRY_SCHEDULED:
            STEP_RETRIES.labels(*labels).inc()
        elif kind == EventKind.FAILED:
            STEP_FAILURES.labels(*labels).inc()
        elif kind == EventKind.COMPENSATED:
            COMPENSATIONS.labels(workflow_type, step.node).inc()
        if kind in _OUTCOMES and _ends_an_attempt(step, kind, event.attempt):
            STEP_DURATION.labels(*labels, _OUTCOMES[kind]).observe(
                _seconds(step.started_at, event.at)
            )


def _ends_an_attempt(step: StepRun, kind: str, attempt: int) -> bool:
    """Whether the event ends a running attempt (so `started_at` is that attempt's start).

    A wait that completes (a signal, a timer) had no attempt; a step cancelled while
    it waited to start or to retry was not running, unless its activity heard the
    cancel mid-flight.
    """
    if not attempt or step.started_at is None:
        return False
    if kind == EventKind.CANCELLED:
        return (step.last_error or {}).get("type") == "ActivityCancelled"
    return True


def _count_run_event(workflow_type: str, kind: str, detail: dict[str, Any]) -> None:
    if kind == EventKind.STARTED:
        RUNS_STARTED.labels(workflow_type).inc()
    elif kind == EventKind.DEAD_LETTERED:
        DEAD_LETTERS.labels(workflow_type).inc()
    elif kind in _RUN_ENDINGS and not detail.get("requested"):
        # A cancel's first event only asks for it ("requested"); its last one ends the run.
        RUNS_ENDED.labels(workflow_type, _RUN_ENDINGS[kind]).inc()


def observe_sweep(seconds: float) -> None:
    SWEEP_DURATION.observe(seconds)


def human_task_decided(
    *, workflow_type: str, node: str, outcome: str, opened_at: datetime, decided_at: datetime
) -> None:
    """Observe a person's decision's latency once its transaction commits."""
    seconds = _seconds(opened_at, decided_at)
    transaction.on_commit(
        lambda: DECISION_LATENCY.labels(workflow_type, node, outcome).observe(seconds), robust=True
    )


def email_link_used() -> None:
    transaction.on_commit(lambda: EMAIL_LINKS.labels("used", "").inc(), robust=True)


def email_link_refused(*, reason: str) -> None:
    """Count a refused link at once: the refusal is the answer, whatever else rolls back."""
    EMAIL_LINKS.labels("refused", reason).inc()


def _seconds(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds(), 0.0)


# Gauges read at scrape time, from indexed queries: each returns
# (name, help, label names, [(label values, value), ...]). Apps add theirs in ready().
ScrapeGauges = Callable[[datetime], list[tuple[str, str, list[str], list[tuple[list[str], float]]]]]
_scrape_gauges: list[ScrapeGauges] = []


def add_scrape_gauges(function: ScrapeGauges) -> None:
    """Have /metrics read `function`'s gauges at each scrape (once per function)."""
    if function not in _scrape_gauges:
        _scrape_gauges.append(function)


def scrape_gauges() -> list[ScrapeGauges]:
    return list(_scrape_gauges)
