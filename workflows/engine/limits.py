"""Counting limited activities' attempts in the database, so every worker obeys one limit.

`admit_attempt` is the claim's hook: inside the claim's transaction it locks the
activity's `ActivityLimiter` row (SELECT ... FOR UPDATE, so claims of the same
activity queue behind each other for a moment and never both take the last slot),
counts the slots still held, and either takes one or says when to ask again. The
step then stays `scheduled` with that due time, and the sweep sends it again once
`sweep_allows` sees room (it sends no more steps than there are free slots).

The first time a step's attempt is held back (by the claim or by the sweep), the run's
timeline says so in words, once (`record_held`): "waits for its concurrency limit (5
at once)". The sweeps that look at it again write nothing more, so the run's page
explains the wait without a line per sweep.

A slot is held by a step while that step is `running`: the record of an attempt
never touches the limiter, and a worker that dies frees its slot when the sweep
expires its lease. Only forward attempts are counted; a compensation (an undo) is
never held back by its activity's limits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from workflows import queues, registry
from workflows.dsl import Activity, Map
from workflows.engine.work import UnitOfWork
from workflows.models import ActivityLimiter, StepEvent, StepRun, WorkflowRun
from workflows.states import EventKind, StepState


def limited_keys() -> list[str]:
    """The limit keys of every registered activity with a limit (the one-statement
    claim leaves their steps to the claim that counts them)."""
    definitions = registry.all_definitions()
    stamp = tuple(id(definition) for definition in definitions)
    if _cache.get("stamp") != stamp:
        _cache["stamp"] = stamp
        _cache["keys"] = sorted(
            {
                queues.limit_key(definition.name, node.name)
                for definition in definitions
                for node in definition.nodes
                if isinstance(node, Activity | Map) and queues.is_limited(node)
            }
        )
    return _cache["keys"]  # type: ignore[return-value]


_cache: dict[str, object] = {}


def admit_attempt(
    *, workflow_type: str, node: Activity, step_id: int, now: datetime | None
) -> queues.Admission:
    """Take a slot of `node`'s limits for step `step_id`'s attempt, or refuse and say when
    to ask again. Call inside the claim's transaction: the slot is the claim's only if
    both commit together.

    `now` None reads the clock once the row is locked (the admission's `at`): an
    attempt admitted into a slot another just gave back then starts after that
    attempt's end, as the timeline shows it."""
    key = queues.limit_key(workflow_type, node.name)
    limiter = ActivityLimiter.objects.select_for_update().filter(key=key).first()
    if limiter is None:  # the activity's first claim: create the row, whoever wins the race
        ActivityLimiter.objects.bulk_create([ActivityLimiter(key=key)], ignore_conflicts=True)
        limiter = ActivityLimiter.objects.select_for_update().get(key=key)
    now = now or timezone.now()
    # Slots are counted only under a concurrency limit; a rate counts starts alone.
    counted = node.concurrency is not None
    holders = _still_running(limiter.holders, but=step_id) if counted else []
    rate = queues.parse_rate(node.rate_limit) if node.rate_limit else None
    decision = queues.admit(
        rate=rate,
        concurrency=node.concurrency,
        in_flight=len(holders),
        window_start=limiter.window_start,
        window_count=limiter.window_count,
        now=now,
    )
    if decision.admitted and counted:
        holders.append(step_id)
    if decision.admitted and rate is not None:
        start, _ = rate.window(now)
        if limiter.window_start != start:
            limiter.window_start, limiter.window_count = start, 0
        limiter.window_count += 1
    limiter.holders = holders
    limiter.updated_at = now
    limiter.save()
    return dataclasses.replace(decision, at=now)


@dataclass
class _SweepBudget:
    """What one sweep may still send of a limited activity's waiting steps, and when the
    others are next looked at."""

    free: int
    held_until: datetime
    # Which limit holds them: "concurrency" or "rate".
    reason: str = "concurrency"


def sweep_holds_until(
    *, workflow_type: str, node: Activity, now: datetime, work: UnitOfWork
) -> datetime | None:
    """Return None if the sweep may send one more of `node`'s waiting steps now (while the
    limiter shows a free slot not already promised to a step this sweep sent), or the
    time to look at the step again: the rate's next window when this one is full, else
    a moment later. Reads without a lock: the claim decides; this only keeps the sweep
    from sending steps that would all be refused."""
    key = queues.limit_key(workflow_type, node.name)
    budget = work.limit_budgets.get(key)
    if budget is None:
        budget = work.limit_budgets[key] = _budget(key, node, now)
    if budget.free <= 0:
        return budget.held_until
    budget.free -= 1
    return None


def _budget(key: str, node: Activity, now: datetime) -> _SweepBudget:
    limiter = ActivityLimiter.objects.filter(key=key).first()
    if limiter is None:  # nothing started yet
        return _SweepBudget(free=queues.UNLIMITED, held_until=now)
    rate = queues.parse_rate(node.rate_limit) if node.rate_limit else None
    state = {
        "rate": rate,
        "concurrency": node.concurrency,
        "in_flight": len(_still_running(limiter.holders)) if node.concurrency else 0,
        "window_start": limiter.window_start,
        "window_count": limiter.window_count,
        "now": now,
    }
    refusal = queues.admit(**state)
    held_until = refusal.retry_at or now + queues.CONCURRENCY_RECHECK
    return _SweepBudget(
        free=queues.free_slots(**state),
        held_until=held_until,
        reason=refusal.reason or ("rate" if node.concurrency is None else "concurrency"),
    )


def sweep_hold_reason(*, workflow_type: str, node: Activity, work: UnitOfWork) -> str:
    """Which limit held `node`'s step back in this sweep (after `sweep_holds_until`)."""
    budget = work.limit_budgets.get(queues.limit_key(workflow_type, node.name))
    return budget.reason if budget is not None else "concurrency"


def held_detail(node: Activity, *, reason: str, until: datetime | None) -> dict[str, object]:
    """What the timeline's "held" event says: which limit, in words, and until when it
    will be looked at again (a rate's next window; a moment later for a free slot)."""
    if reason == "rate":
        limit = f"rate limit ({node.rate_limit})"
    else:
        limit = f"concurrency limit ({node.concurrency} at once)"
    message = f"waits for its {limit}"
    if reason == "rate" and until is not None:
        message += f", until the next window at {until:%H:%M:%S %Z}".rstrip()
    # "limit" lets a page say the same in its reader's language (approvals' held_words).
    value = node.rate_limit if reason == "rate" else node.concurrency
    return {"message": message, "reason": reason, "until": until, "limit": value}


def first_hold(run: WorkflowRun, step: StepRun) -> bool:
    """Whether this attempt of `step` has not yet said, on the timeline, that it is held.

    Read through the events' (run, at) index; a step's run has few events. The claim
    and the sweep both lock the step's run row first (the claim FOR NO KEY UPDATE, the
    sweep FOR UPDATE), so two hold decisions for one step take turns, and the second
    sees the line the first committed."""
    return not StepEvent.objects.filter(
        run_id=run.pk, step_id=step.pk, kind=EventKind.HELD, attempt=step.attempt
    ).exists()


def record_held(
    *,
    run: WorkflowRun,
    step: StepRun,
    node: Activity,
    reason: str,
    until: datetime | None,
    now: datetime,
) -> bool:
    """Say once per attempt on the run's timeline that `step` waits for `node`'s limits
    (the claim's refusal calls it, outside a unit of work); return whether it wrote."""
    if not first_hold(run, step):
        return False
    StepEvent.objects.create(
        run=run,
        step=step,
        node=step.node,
        kind=EventKind.HELD,
        attempt=step.attempt,
        at=now,
        detail=_json(held_detail(node, reason=reason, until=until)),
    )
    return True


def _json(detail: dict[str, object]) -> dict[str, object]:
    until = detail.get("until")
    return {**detail, "until": until.isoformat() if isinstance(until, datetime) else None}


def _still_running(step_ids: list[int], *, but: int | None = None) -> list[int]:
    """The steps among `step_ids` still running (each holds a slot), `but` left out."""
    ids = [step_id for step_id in step_ids if step_id != but]
    if not ids:
        return []
    return list(
        StepRun.objects.filter(pk__in=ids, state=StepState.RUNNING)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
