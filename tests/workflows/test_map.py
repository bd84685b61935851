"""Maps: an activity or a child workflow once per item of a list, a few at a time.

Driven by the authors' test kit (workflow_env) on the real engine and database; the
definitions are test_map, test_map_finish_all and test_map_children in
tests/workflows/definitions.py (two items at a time, then `after`).
"""

from __future__ import annotations

from workflows.examples.models import ServiceEffect
from workflows.models import StepRun, WorkflowRun, step_key
from workflows.states import RunState, StepKind, StepState

IN_FLIGHT = (StepState.SCHEDULED, StepState.RUNNING, StepState.RETRY_WAIT)


def items_of(run: WorkflowRun) -> list[StepRun]:
    return list(
        run.steps.filter(node="each", kind=StepKind.FORWARD, item__isnull=False).order_by("item")
    )


def map_step(run: WorkflowRun) -> StepRun:
    return run.steps.get(node="each", kind=StepKind.FORWARD, item__isnull=True)


def undone_items(run: WorkflowRun) -> list[int]:
    undos = run.steps.filter(node="each", kind=StepKind.COMPENSATION, state=StepState.SUCCEEDED)
    return list(undos.order_by("finished_at", "id").values_list("item", flat=True))


def applied(run: WorkflowRun, action: str) -> list[str]:
    return sorted(
        ServiceEffect.objects.filter(
            run_id=run.pk, action=action, applied_at__isnull=False
        ).values_list("idempotency_key", flat=True)
    )


def watch_concurrency(workflow_env, workflow_type: str) -> list[int]:
    """Record, at each item's attempt, how many of the run's items are in flight."""
    seen: list[int] = []

    def counting(context):
        seen.append(
            StepRun.objects.filter(
                run_id=context.run_id, node="each", item__isnull=False, state__in=IN_FLIGHT
            ).count()
        )
        return {"item": context.item}

    workflow_env.replace_activity(workflow_type, "each", counting)
    return seen


class TestMappingAnActivity:
    def test_each_item_runs_once_and_the_results_come_in_item_order(self, workflow_env):
        # Item 0 fails twice first, so it finishes last.
        run = workflow_env.start(
            "test_map", {"items": ["a", "b", "c", "d"], "simulate": {"item0": "flaky"}}
        )
        workflow_env.advance(seconds=5)

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        results = map_step(run).result
        assert [result["item"] for result in results] == ["a", "b", "c", "d"]
        assert [result["index"] for result in results] == [0, 1, 2, 3]
        finished = sorted(items_of(run), key=lambda step: (step.finished_at, step.pk))
        assert finished[-1].item == 0  # it did finish last
        workflow_env.assert_path(run, "each", "after")

    def test_no_more_than_max_concurrency_items_are_in_flight(self, workflow_env):
        seen = watch_concurrency(workflow_env, "test_map")

        run = workflow_env.start("test_map", {"items": list(range(7))})

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert len(seen) == 7
        assert max(seen) == 2

    def test_each_item_has_its_own_idempotency_key(self, workflow_env):
        run = workflow_env.start("test_map", {"items": ["a", "b", "c"]})

        keys = [step.idempotency_key for step in items_of(run)]

        assert keys == [f"{run.pk}:each#0", f"{run.pk}:each#1", f"{run.pk}:each#2"]
        assert applied(run, "item") == sorted(keys)

    def test_an_items_key_names_its_round_in_a_loops_later_rounds_and_its_undo(self):
        assert step_key(run_id="r", node="each", round=2, item=3) == "r:each@2#3"
        assert step_key(run_id="r", node="each", round=0, item=0) == "r:each#0"
        assert (
            step_key(run_id="r", node="each", round=1, item=7, compensation=True)
            == "r:each@1#7:compensate"
        )

    def test_an_empty_list_goes_straight_on_with_no_results(self, workflow_env):
        run = workflow_env.start("test_map", {"items": []})

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert map_step(run).result == []
        workflow_env.assert_path(run, "each", "after")

    def test_the_items_rows_are_written_once_and_the_list_never_again(self, workflow_env):
        run = workflow_env.start("test_map", {"items": list(range(5))})

        steps = items_of(run)

        assert [step.item_value for step in steps] == [0, 1, 2, 3, 4]
        assert map_step(run).item_value is None


class TestFailFast:
    def test_a_failed_item_fails_the_map_cancels_the_rest_and_undoes_the_done(self, workflow_env):
        run = workflow_env.start(
            "test_map", {"items": list(range(6)), "simulate": {"item1": "decline"}}
        )

        run = workflow_env.assert_state(run, RunState.COMPENSATED)
        states = [step.state for step in items_of(run)]
        assert states == [
            StepState.COMPENSATED,
            StepState.FAILED,
            *[StepState.CANCELLED] * 4,
        ]
        assert map_step(run).state == StepState.FAILED
        assert run.error["type"] == "MapItemFailed"
        assert run.error["failed_items"] == [{"item": 1, "error": "PaymentDeclined"}]
        assert applied(run, "item") == [f"{run.pk}:each#0"]
        assert applied(run, "undo_item") == [f"{run.pk}:each#0:compensate"]
        assert not run.steps.filter(node="after").exists()


class TestFinishAll:
    def test_the_others_finish_then_the_map_fails_and_every_done_item_is_undone(self, workflow_env):
        run = workflow_env.start(
            "test_map_finish_all", {"items": list(range(5)), "simulate": {"item1": "decline"}}
        )

        run = workflow_env.assert_state(run, RunState.COMPENSATED)
        assert [step.state for step in items_of(run)] == [
            StepState.COMPENSATED,
            StepState.FAILED,
            StepState.COMPENSATED,
            StepState.COMPENSATED,
            StepState.COMPENSATED,
        ]
        assert run.error["failed_items"] == [{"item": 1, "error": "PaymentDeclined"}]
        assert "1 of 5 items failed" in run.error["message"]
        assert len(applied(run, "item")) == 4
        assert len(applied(run, "undo_item")) == 4

    def test_with_no_failure_it_succeeds(self, workflow_env):
        run = workflow_env.start("test_map_finish_all", {"items": [1, 2, 3]})

        workflow_env.assert_state(run, RunState.SUCCEEDED)


class TestCompensation:
    def test_completed_items_are_undone_in_reverse_completion_order(self, workflow_env):
        # Item 0 is retried, so it completes last and is undone first; `after` then
        # declines, so the whole map is undone.
        run = workflow_env.start(
            "test_map",
            {"items": list(range(5)), "simulate": {"item0": "flaky", "after": "decline"}},
        )
        workflow_env.advance(seconds=5)

        run = workflow_env.assert_state(run, RunState.COMPENSATED)
        completed = sorted(items_of(run), key=lambda step: (step.finished_at, step.pk))
        assert [step.item for step in completed][-1] == 0
        assert undone_items(run) == [0, 4, 3, 2, 1]
        undo_keys = [f"{run.pk}:each#{index}:compensate" for index in range(5)]
        assert applied(run, "undo_item") == sorted(undo_keys)

    def test_an_undo_is_told_its_item_and_the_key_it_undoes(self, workflow_env):
        undos = []
        workflow_env.replace_activity(
            "test_map",
            "each",
            lambda context: {"item": context.item},
            compensate=lambda context: undos.append(
                (context.item, context.item_index, context.undoes_key, context.result_to_undo)
            ),
        )
        run = workflow_env.start("test_map", {"items": ["x"], "simulate": {"after": "decline"}})

        workflow_env.assert_state(run, RunState.COMPENSATED)
        assert undos == [("x", 0, f"{run.pk}:each#0", {"item": "x"})]


class TestMappingChildWorkflows:
    def test_each_item_is_a_child_run_and_results_come_in_item_order(self, workflow_env):
        items = [{"label": name} for name in ("ann", "ben", "cy", "dee", "eve")]

        run = workflow_env.start("test_map_children", {"items": items})

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert [result["label"] for result in map_step(run).result] == [
            "ann",
            "ben",
            "cy",
            "dee",
            "eve",
        ]
        children = WorkflowRun.objects.filter(parent_run=run)
        assert children.count() == 5
        assert sorted(children.values_list("idempotency_key", flat=True)) == [
            f"{run.pk}:each#{index}/attempt-1" for index in range(5)
        ]

    def test_no_more_than_max_concurrency_children_are_live(self, workflow_env):
        items = [{"label": str(index), "hold": True} for index in range(4)]
        run = workflow_env.start("test_map_children", {"items": items})

        live = WorkflowRun.objects.filter(parent_run=run)
        assert live.count() == 2
        first = live.order_by("created_at").first()
        workflow_env.signal(first, "go")

        assert WorkflowRun.objects.filter(parent_run=run).count() == 3
        assert WorkflowRun.objects.filter(parent_run=run, state=RunState.WAITING).count() == 2

    def test_cancelling_the_parent_cancels_the_live_children(self, workflow_env):
        items = [{"label": str(index), "hold": True} for index in range(4)]
        run = workflow_env.start("test_map_children", {"items": items})

        run = workflow_env.cancel(run)

        assert run.state == RunState.CANCELLED
        children = WorkflowRun.objects.filter(parent_run=run)
        assert sorted(children.values_list("state", flat=True)) == [RunState.CANCELLED] * 2
        # The two started items waited for their children's undo; the others never began.
        assert [step.state for step in items_of(run)] == [
            StepState.COMPENSATED,
            StepState.COMPENSATED,
            StepState.CANCELLED,
            StepState.CANCELLED,
        ]
        assert run.finished_at >= max(child.finished_at for child in children)

    def test_undoing_the_map_compensates_each_succeeded_child_in_reverse(self, workflow_env):
        items = [{"label": name} for name in ("ann", "ben", "cy")]

        run = workflow_env.start(
            "test_map_children", {"items": items, "simulate": {"after": "decline"}}
        )

        run = workflow_env.assert_state(run, RunState.COMPENSATED)
        children = WorkflowRun.objects.filter(parent_run=run)
        assert set(children.values_list("state", flat=True)) == {RunState.COMPENSATED}
        assert undone_items(run) == [2, 1, 0]
        assert [step.state for step in items_of(run)] == [StepState.COMPENSATED] * 3
