"""Runs and steps built and loaded without Model.__init__ hold what it would give them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Model, signals
from django.utils import timezone

from workflows.ids import time_ordered_id
from workflows.models import StepEvent, StepRun, WorkflowRun, new_row
from workflows.states import EventKind, StepState

pytestmark = pytest.mark.django_db


def _fields(row: Model) -> dict:
    return {name: value for name, value in row.__dict__.items() if name != "_state"}


def _loaded_by_django(row: Model) -> Model:
    """The row as Django's own Model.from_db builds it from the same values."""
    names = [field.attname for field in row._meta.concrete_fields]
    return Model.from_db.__func__(type(row), "default", names, [getattr(row, n) for n in names])


@pytest.fixture
def sleeping_run(start, drive) -> WorkflowRun:
    return drive(start("test_sleeping", {}))


class TestLoadingRows:
    def test_a_loaded_run_and_step_hold_what_model_init_would_give_them(self, sleeping_run):
        run = WorkflowRun.objects.get(pk=sleeping_run.pk)
        step = StepRun.objects.get(run=run, node="nap")

        for row in (run, step):
            expected = _loaded_by_django(row)
            assert _fields(row) == _fields(expected)
            assert (row._state.adding, row._state.db) == (False, "default")
            assert row.changed_fields() == []

    def test_a_loaded_step_still_moves_and_is_fenced(self, sleeping_run):
        step = StepRun.objects.get(run=sleeping_run, node="nap")
        StepRun.objects.filter(pk=step.pk).update(state=StepState.CANCELLED)

        step.succeed(result=None, now=timezone.now())

        assert step.changed_fields() == ["state", "due_at", "finished_at"]
        with pytest.raises(Exception, match="state has been changed"):
            step.save()

    def test_a_row_read_in_part_loads_the_rest_when_asked(self, sleeping_run):
        step = StepRun.objects.only("pk", "run_id").get(run=sleeping_run, node="nap")

        assert "node" in step.get_deferred_fields()
        assert step.node == "nap"

    def test_a_post_init_listener_hears_every_loaded_row(self, sleeping_run):
        heard = []

        def listen(sender, instance, **kwargs):
            heard.append(instance.pk)

        signals.post_init.connect(listen, sender=StepRun)
        try:
            steps = list(StepRun.objects.filter(run=sleeping_run))
        finally:
            signals.post_init.disconnect(listen, sender=StepRun)

        assert heard == [step.pk for step in steps]


class TestNewRow:
    def test_a_new_step_holds_what_model_init_would_give_it(self, sleeping_run):
        now = timezone.now()
        values = dict(
            run=sleeping_run,
            node="after",
            round=1,
            state=StepState.SCHEDULED,
            scheduled_at=now,
            due_at=now + timedelta(seconds=30),
            lease=timedelta(minutes=5),
        )

        built, expected = new_row(StepRun, **values), StepRun(**values)

        assert _fields(built) == _fields(expected)
        assert built.run is sleeping_run
        assert (built._state.adding, built._state.db) == (True, "default")
        assert built.changed_fields() == []

    def test_a_run_given_its_id_holds_it_and_makes_no_other(self, monkeypatch):
        made = []
        field = WorkflowRun._meta.pk
        default = field.get_default
        # What Field.get_default calls (Django keeps the field's default there).
        monkeypatch.setattr(field, "_get_default", lambda: made.append(1) or default())
        given = time_ordered_id()

        built = new_row(WorkflowRun, id=given, workflow_type="t", workflow_version=1)

        assert built.id == given
        assert made == []  # as Model.__init__, which calls a default only for a field not given

    def test_a_new_event_names_its_step_by_id_once_the_step_is_written(self, sleeping_run):
        step = new_row(StepRun, run=sleeping_run, node="later", scheduled_at=timezone.now())

        event = new_row(
            StepEvent, run=sleeping_run, step=step, kind=EventKind.STARTED, at=timezone.now()
        )
        step.save()
        event.save()

        assert StepEvent.objects.get(pk=event.pk).step_id == step.pk

    def test_each_new_row_gets_its_own_callable_defaults(self):
        first = new_row(WorkflowRun, workflow_type="t", workflow_version=1, input={})
        second = new_row(WorkflowRun, workflow_type="t", workflow_version=1, input={})

        assert first.pk != second.pk
        assert first.trace_context == {}
        assert first.trace_context is not second.trace_context

    def test_a_keyword_that_names_no_field_is_refused_as_model_init_refuses_it(self):
        with pytest.raises(TypeError, match="unexpected keyword arguments: 'nonsense'"):
            new_row(StepRun, node="x", nonsense=1)
