"""Child workflows: a step starts a run of another type, waits for it and takes its result.

Driven by the authors' test kit (workflow_env) on the real engine and database; the
definitions are test_parent and test_child in tests/workflows/definitions.py.
tests/e2e/test_worker_processes.py kills a real worker while a child is in flight.
"""

from __future__ import annotations

from dataclasses import replace

from tests.workflows.definitions import PARENT
from workflows import engine, registry
from workflows.dsl import ChildWorkflow
from workflows.engine.children import child_ended
from workflows.examples.models import ServiceEffect
from workflows.models import StepRun, WorkflowRun
from workflows.states import EventKind, RunState, StepKind, StepState


def children_of(run: WorkflowRun) -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(parent_run=run).order_by("started_at", "created_at"))


def call_step(run: WorkflowRun) -> StepRun:
    return run.steps.get(node="call", kind=StepKind.FORWARD)


def applied(run: WorkflowRun) -> dict[str, int]:
    """Effects applied for the run and its children, by action."""
    runs = [str(run.pk), *(str(child.pk) for child in children_of(run))]
    counts: dict[str, int] = {}
    for action in ServiceEffect.objects.filter(
        run_id__in=runs, applied_at__isnull=False
    ).values_list("action", flat=True):
        counts[action] = counts.get(action, 0) + 1
    return counts


class TestStartingAChild:
    def test_the_parent_takes_the_childs_result_and_goes_on(self, workflow_env):
        run = workflow_env.start("test_parent", {})

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        (child,) = children_of(run)
        assert child.state == RunState.SUCCEEDED
        assert call_step(run).result == {"done": True, "label": "only"}
        workflow_env.assert_path(run, "before", "call", "after")
        assert applied(run) == {"before": 1, "child_work": 1, "after": 1}

    def test_the_child_records_its_parent_and_shares_its_trace(self, workflow_env):
        run = workflow_env.start("test_parent", {}, correlation_id="trace-42")

        (child,) = children_of(run)

        assert child.parent_run_id == run.pk
        assert child.parent_step_id == call_step(run).pk
        assert list(call_step(run).children.all()) == [child]
        assert child.correlation_id == run.correlation_id == "trace-42"
        started = run.events.get(node="call", kind=EventKind.STARTED)
        assert started.detail["child_run"] == str(child.pk)

    def test_a_parent_without_a_correlation_id_lends_its_own_id_as_the_trace(self, workflow_env):
        run = workflow_env.start("test_parent", {})

        (child,) = children_of(run)

        assert child.correlation_id == str(run.pk)

    def test_the_parent_waits_while_the_child_waits(self, workflow_env):
        run = workflow_env.start("test_parent", {"hold": True})

        (child,) = children_of(run)
        assert workflow_env.refresh(run).state == RunState.WAITING
        assert child.state == RunState.WAITING
        assert call_step(run).state == StepState.WAITING

        workflow_env.signal(child, "go")

        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_an_input_that_cannot_be_computed_fails_the_step_without_a_retry(self, workflow_env):
        def broken(data):
            raise KeyError("director")

        with substituted_call(ChildWorkflow("call", workflow="test_child", input=broken)):
            run = workflow_env.start("test_parent", {})

            run = workflow_env.assert_state(run, RunState.COMPENSATED)

        step = call_step(run)
        assert (step.state, step.attempt) == (StepState.FAILED, 1)
        assert step.last_error["type"] == "ChildInputError"
        assert children_of(run) == []
        assert applied(run) == {"before": 1, "undo_before": 1}

    def test_an_unknown_child_type_fails_the_step_without_a_retry(self, workflow_env):
        node = ChildWorkflow("call", workflow="no_such_type", input=lambda data: {}, next="after")
        with substituted_call(node):
            run = workflow_env.start("test_parent", {})

            run = workflow_env.assert_state(run, RunState.COMPENSATED)

        step = call_step(run)
        assert step.state == StepState.FAILED
        assert step.attempt == 1
        assert step.last_error["type"] == "UnknownWorkflow"
        assert "no_such_type" in step.last_error["message"]
        assert children_of(run) == []


def substituted_call(node: ChildWorkflow):
    """Stand `node` in for test_parent's `call` until the block ends."""
    nodes = tuple(node if each.name == "call" else each for each in PARENT.nodes)
    return registry.substituted(replace(PARENT, nodes=nodes))


class TestRedelivery:
    def test_a_redelivered_message_or_a_repeated_word_never_starts_a_second_child(
        self, workflow_env
    ):
        run = workflow_env.start("test_parent", {"hold": True})
        before = run.steps.get(node="before")
        (child,) = children_of(run)

        engine.execute_step(step_id=before.pk, now=workflow_env.now)  # the message again
        child_ended(step_id=call_step(run).pk, now=workflow_env.now)  # a stray word
        workflow_env.settle()

        assert children_of(run) == [child]
        assert call_step(run).attempt == 1

    def test_the_childs_start_is_keyed_on_the_step_and_attempt(self, workflow_env):
        run = workflow_env.start("test_parent", {"hold": True})
        (child,) = children_of(run)
        key = f"{call_step(run).idempotency_key}/attempt-1"

        again, created = engine.start_workflow(
            workflow_type="test_child", input={}, idempotency_key=key, now=workflow_env.now
        )

        assert child.idempotency_key == key
        assert (again.pk, created) == (child.pk, False)

    def test_the_end_told_twice_moves_the_parent_once(self, workflow_env):
        run = workflow_env.start("test_parent", {})
        step = call_step(run)

        child_ended(step_id=step.pk, now=workflow_env.now)
        child_ended(step_id=step.pk, now=workflow_env.now)

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        assert run.steps.filter(node="after").count() == 1
        assert applied(run)["after"] == 1

    def test_a_lost_word_is_made_up_by_the_sweep(self, workflow_env, monkeypatch):
        from workflows.engine import work

        monkeypatch.setattr(work, "tell_parents", lambda step_ids, *, now: None)
        run = workflow_env.start("test_parent", {})
        assert call_step(run).state == StepState.WAITING

        workflow_env.advance(minutes=5)

        workflow_env.assert_state(run, RunState.SUCCEEDED)


class TestCancelling:
    def test_cancelling_the_parent_cancels_the_child_and_both_undo(self, workflow_env):
        run = workflow_env.start("test_parent", {"hold": True})
        (child,) = children_of(run)

        run = workflow_env.cancel(run)

        assert run.state == RunState.CANCELLED
        child.refresh_from_db()
        assert child.state == RunState.CANCELLED
        # The parent's undo waited for the child's: it ended last.
        assert run.finished_at >= child.finished_at
        assert call_step(run).state == StepState.COMPENSATED
        assert workflow_env.undone(run) == ["call", "before"]
        assert applied(run) == {
            "before": 1,
            "undo_before": 1,
            "child_work": 1,
            "undo_child_work": 1,
        }


class TestAFailingChild:
    def test_a_failing_child_fails_the_step_after_its_retry_each_child_after_the_last(
        self, workflow_env
    ):
        run = workflow_env.start("test_parent", {"child_simulate": {"child_work": "fail"}})

        for _ in range(3):
            workflow_env.advance(seconds=1)

        run = workflow_env.assert_state(run, RunState.COMPENSATED)
        first, second = children_of(run)
        assert (first.state, second.state) == (RunState.FAILED, RunState.FAILED)
        # Never two live at once: the retry's child began after the first ended.
        assert second.started_at >= first.finished_at
        step = call_step(run)
        assert (step.state, step.attempt) == (StepState.FAILED, 2)
        assert step.last_error["type"] == "ChildRunFailed"
        assert run.error["node"] == "call"
        assert run.events.filter(node="call", kind=EventKind.RETRY_SCHEDULED).count() == 1
        assert applied(run) == {"before": 1, "undo_before": 1}

    def test_a_retry_starts_a_new_child_that_may_succeed(self, workflow_env):
        calls = []

        def fails_for_the_first_child(context):
            calls.append(context.run_id)
            if context.run_id == calls[0]:  # each of the first child's three attempts
                raise RuntimeError("the first child's work breaks")
            return {"worked": True}

        workflow_env.replace_activity("test_child", "child_work", fails_for_the_first_child)
        run = workflow_env.start("test_parent", {})
        for _ in range(5):
            workflow_env.advance(seconds=1)

        run = workflow_env.assert_state(run, RunState.SUCCEEDED)
        first, second = children_of(run)
        assert (first.state, second.state) == (RunState.FAILED, RunState.SUCCEEDED)
        assert len(calls) == 4
        assert call_step(run).attempt == 2
        assert second.idempotency_key.endswith("/attempt-2")


class TestCompensatingTheParent:
    def test_undoing_a_parent_whose_child_succeeded_compensates_the_child(self, workflow_env):
        run = workflow_env.start("test_parent", {"simulate": {"after": "decline"}})

        run = workflow_env.assert_state(run, RunState.COMPENSATED)

        (child,) = children_of(run)
        assert child.state == RunState.COMPENSATED
        assert child.error == {"undone_for_parent": str(run.pk)}
        assert call_step(run).state == StepState.COMPENSATED
        assert workflow_env.undone(run) == ["call", "before"]
        assert workflow_env.undone(child) == ["child_work"]
        assert applied(run) == {
            "before": 1,
            "child_work": 1,
            "undo_child_work": 1,
            "undo_before": 1,
        }

    def test_the_parent_waits_for_the_childs_undo_before_undoing_what_came_earlier(
        self, workflow_env
    ):
        workflow_env.replace_activity(
            "test_child",
            "child_work",
            lambda context: {"worked": True},
            compensate=lambda context: (_ for _ in ()).throw(RuntimeError("undo breaks")),
        )
        run = workflow_env.start("test_parent", {"simulate": {"after": "decline"}})
        for _ in range(10):
            workflow_env.advance(seconds=30)

        (child,) = children_of(run)
        assert child.state == RunState.DEAD_LETTERED
        run = workflow_env.refresh(run)
        assert run.state == RunState.COMPENSATING
        assert run.steps.get(node="before").state == StepState.SUCCEEDED  # not undone yet

        engine.resume_dead_letter(run_id=child.pk, now=workflow_env.now)
        # Called outside the kit, the resume's word on commit stays in the test's
        # transaction; the sweep's next look at the waiting undo finds the child's end.
        workflow_env.advance(minutes=5)

        workflow_env.assert_state(run, RunState.COMPENSATED)
        assert workflow_env.undone(run) == ["call", "before"]
