"""The workflow types the benchmarks start (registered through BATON_WORKFLOW_MODULES).

No-op activities, so a figure is the engine's own cost and nothing else's. The
approval types make real human tasks, the templates the seeder clones. The scale
group's history is orders (`ORDER`, `ORDER_REVIEW`): the same no-op chain and
approval, but with an input schema whose `order_id` operators search in the
console, as a company's types declare their business key.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from workflows import registry
from workflows.activity import ActivityContext
from workflows.dsl import Activity, Approval, Map, Node, RunData, Sleep, Workflow

NOOP3 = "bench_noop3"
NOOP10 = "bench_noop10"
LOCAL10 = "bench_local10"
SLEEP = "bench_sleep"
APPROVAL_MINE = "bench_approval_mine"
APPROVAL_QUEUE = "bench_approval_queue"
APPROVAL_OTHERS = "bench_approval_others"
MAP = "bench_map"
# The scale seed's finished history: an order's three no-op steps, and an order
# approved by a reviewer, each found in the console by its order id.
ORDER = "bench_order"
ORDER_REVIEW = "bench_order_review"
# Long enough never to come due in a benchmark; the seeder moves each copy's due time.
DEADLINE = timedelta(days=36500)
REVIEWERS_GROUP = "bench-reviewers"
OTHERS_GROUP = "bench-others"


def noop(context: ActivityContext) -> None:
    """Do nothing: the step's cost is the engine's."""
    return None


class OrderInput(BaseModel):
    """An order's input: the key the shop knows it by, which the console searches."""

    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(min_length=1, max_length=100)


class ReviewedOrderInput(OrderInput):
    """An order a reviewer (by username) approves."""

    assignee: str
    title: str = "Bench review"


def chain(name: str, steps: int, *, local: bool = False) -> Workflow:
    """Return a workflow of `steps` no-op activities, one after another."""
    names = [f"step_{index:05d}" for index in range(1, steps + 1)]
    nodes: list[Node] = [
        Activity(
            name=node,
            run=noop,
            next=names[index + 1] if index + 1 < steps else None,
            mutating=False,
            local=local,
        )
        for index, node in enumerate(names)
    ]
    return Workflow(name=name, version=1, start=names[0], nodes=tuple(nodes))


def _map_items(data: RunData) -> list[int]:
    return list(range(data.input["items"]))


def _assignee(data: RunData) -> list[str]:
    return [data.input["assignee"]]


def _title(data: RunData) -> str:
    return str(data.input.get("title", "Bench review"))


def _register() -> None:
    for workflow in (
        chain(NOOP3, 3),
        chain(NOOP10, 10),
        chain(LOCAL10, 10, local=True),
        # A map over `input["items"]` no-op items, two at a time (so that, in a short list
        # as in a long one, nearly every item that ends starts the next).
        Workflow(
            name=MAP,
            version=1,
            start="each",
            nodes=(
                Map(
                    name="each",
                    items=_map_items,
                    activity=noop,
                    mutating=False,
                    max_concurrency=2,
                ),
            ),
        ),
        Workflow(
            name=SLEEP,
            version=1,
            start="nap",
            nodes=(
                Sleep(name="nap", duration=timedelta(days=36500), next="after_nap"),
                Activity(name="after_nap", run=noop, mutating=False),
            ),
        ),
        Workflow(
            name=APPROVAL_MINE,
            version=1,
            start="review",
            nodes=(Approval(name="review", title=_title, assignees=_assignee, deadline=DEADLINE),),
        ),
        replace(chain(ORDER, 3), input_schema=OrderInput, searchable=("order_id",)),
        Workflow(
            name=ORDER_REVIEW,
            version=1,
            start="review",
            input_schema=ReviewedOrderInput,
            searchable=("order_id",),
            nodes=(Approval(name="review", title=_title, assignees=_assignee, deadline=DEADLINE),),
        ),
        Workflow(
            name=APPROVAL_QUEUE,
            version=1,
            start="review",
            nodes=(
                Approval(name="review", title=_title, groups=(REVIEWERS_GROUP,), deadline=DEADLINE),
            ),
        ),
        Workflow(
            name=APPROVAL_OTHERS,
            version=1,
            start="review",
            nodes=(
                Approval(name="review", title=_title, groups=(OTHERS_GROUP,), deadline=DEADLINE),
            ),
        ),
    ):
        registry.register(workflow)


_register()
