"""The cost of one map item with 10 items in the list and with a long list (1,000 at full size).

A map keeps each item on a row of its own and a few counters on its node's step, so
an item should cost the same statements and time however long the list: nothing
rewrites a document that grows with the list. The run is driven in-process as a
worker would (`execute_step` on each scheduled item, two in flight at a time), and
each item's statements and time are counted; the figures are medians over the
items of each list (the short list run `SHORT_RUNS` times, for as many samples),
the first and last two left out: starting and ending the map are a cost of the
map, not of an item.
"""

from __future__ import annotations

from bench.definitions import MAP
from bench.engine import next_step
from bench.measure import counting, median, now_ns
from bench.profiles import Profile
from bench.report import Result
from workflows import engine
from workflows.states import RunState

SHORT = 10
SHORT_RUNS = 20


def _per_item(items: int) -> tuple[list[int], list[float], str]:
    """Drive a map over `items` items; return each item's statements and milliseconds."""
    run, _ = engine.start_workflow(workflow_type=MAP, input={"items": items})
    statements: list[int] = []
    times: list[float] = []
    while (step_id := next_step(run=run)) is not None:
        with counting() as counts:
            started = now_ns()
            engine.execute_step(step_id=step_id)
            times.append((now_ns() - started) / 1e6)
        statements.append(counts.statements)
    run.refresh_from_db()
    if run.state != RunState.SUCCEEDED:
        raise RuntimeError(f"the map over {items} items ended {run.state}: {run.error}")
    return statements, times, run.state


def _middle(values: list) -> list:
    """Leave out the first two and last two items (the map's start and end)."""
    return values[2:-2] if len(values) > 4 else values


def run(*, profile: Profile) -> list[Result]:
    short_statements: list[int] = []
    short_times: list[float] = []
    for _ in range(SHORT_RUNS):
        statements, times, _ = _per_item(SHORT)
        short_statements += _middle(statements)
        short_times += _middle(times)
    long_statements, long_times, _ = _per_item(profile.map_items)
    note = (
        f"a map of {profile.map_items:,} no-op items vs {SHORT_RUNS} of {SHORT}, two in "
        "flight; median over the items but each list's first and last two"
    )
    return [
        Result(
            "map_item_statements",
            median(_middle(long_statements)),
            median(short_statements),
            note=f"{note}; range at {profile.map_items:,}: "
            f"{min(_middle(long_statements))}-{max(_middle(long_statements))}",
            samples=len(long_statements),
        ),
        Result(
            "map_item_ms",
            median(_middle(long_times)),
            median(short_times),
            note=note,
            samples=len(long_times),
            extra={"items": profile.map_items, "short": SHORT},
        ),
    ]
