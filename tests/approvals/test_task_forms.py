"""Task forms in the browser: drawn and read by the start forms' generator, checked at start-up."""

from __future__ import annotations

import pydantic

from approvals import task_forms
from approvals.checks import check_task_forms
from workflows import registry
from workflows.dsl import Approval, Workflow


class CostCentre(pydantic.BaseModel):
    cost_centre: str = pydantic.Field(min_length=1, description="where it is charged")
    comment: str = ""  # the decision panel's own field name, kept apart by the prefix


def approval(form=CostCentre) -> Approval:
    return Approval("finance", title="Finance", groups=("finance",), form=form)


class TestReadingAPostedForm:
    def test_boxes_post_under_their_prefix_so_they_never_meet_the_panels_fields(self):
        values, form = task_forms.read(
            approval(),
            {"comment": "the panel's", "form-comment": "the form's", "form-cost_centre": "FIN-1"},
        )

        assert values == {"cost_centre": "FIN-1", "comment": "the form's"}
        assert [box.posted_name for group in form.groups() for box in [group.box]] == [
            "form-cost_centre",
            "form-comment",
        ]

    def test_an_approval_without_a_form_reads_nothing(self):
        assert task_forms.read(Approval("plain"), {"form-x": "1"}) == ({}, None)

    def test_errors_named_by_the_api_land_beside_their_boxes(self):
        _, form = task_forms.read(approval(), {})

        shown = task_forms.with_errors(
            form, [{"field": "form.cost_centre", "message": "Field required", "type": "missing"}]
        )

        assert shown.errors == {"cost_centre": "This is required."}


class TestTheCheck:
    def test_a_form_with_a_list_is_refused_at_start_up(self):
        class Items(pydantic.BaseModel):
            lines: list[str]

        bad = Workflow(name="bad_form", version=1, start="finance", nodes=(approval(Items),))
        registry.register(bad)
        try:
            errors = check_task_forms()
        finally:
            registry.unregister(bad)

        assert [(error.id, error.msg) for error in errors] == [
            (
                "approvals.E001",
                "the form of approval 'finance' has fields a task page cannot show: lines "
                "(use text, numbers, dates, choices or a mapping)",
            )
        ]

    def test_the_shipped_forms_pass(self):
        assert check_task_forms() == []
