"""The picture of a definition, with the run's position on it: each node carries its
step's state (its latest round's), or its undo's while the undo runs or once it failed."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.utils import translation

from tests.workflows.test_engine import sweep_until_quiet
from workflows import registry
from workflows.diagram import UNDO_FAILED, draw

pytestmark = pytest.mark.django_db


def boxes(run) -> dict[str, tuple[str, bool]]:
    definition = registry.get(run.workflow_type, run.workflow_version)
    return {box.name: (box.state, box.current) for box in draw(definition, run.steps.all()).boxes}


class TestDraw:
    def test_each_box_carries_its_nodes_label_in_the_readers_language(self, start, order_input):
        run = start("order", order_input())

        with translation.override("de"):
            drawn = draw(registry.get("order", 1), run.steps.all())

        labels = {box.name: box.label for box in drawn.boxes}
        assert labels["reserve_inventory"] == "Bestand reservieren"
        assert labels["validate"] == "Bestellung prüfen"

    def test_each_boxs_state_and_kind_are_said_in_the_readers_language(self, start, order_input):
        run = start("order", order_input())

        drawn = draw(registry.get("order", 1), run.steps.all())
        with translation.override("de"):
            first = next(box for box in drawn.boxes if box.name == "validate")
            said = (first.state, first.state_words, first.kind_words)

        assert said == ("scheduled", "geplant", "Aktivität")

    def test_a_running_run_marks_its_current_step(self, start):
        run = start("test_linear", {})

        assert boxes(run) == {
            "first": ("scheduled", True),
            "second": ("", False),
            "third": ("", False),
        }

    def test_a_dead_letter_marks_the_node_whose_undo_failed(self, start, drive, order_input):
        failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
        run = sweep_until_quiet(drive(start("order", failing)), drive)

        drawn = boxes(run)

        assert drawn["charge_payment"] == (UNDO_FAILED, False)
        assert drawn["ship"] == ("failed", False)
        assert drawn["reserve_inventory"] == ("succeeded", False)  # undone after, in reverse


class TestCatchAndDeadlineEdges:
    def test_a_catch_path_is_drawn_dashed_and_labelled_with_the_errors_it_catches(self):
        arrows = draw(registry.get("test_catching"), []).arrows

        dashed = [(arrow.label, arrow.dashed) for arrow in arrows if arrow.label]

        assert dashed == [("PaymentDeclined, Timeout", True)]
        assert sum(not arrow.dashed for arrow in arrows) == 2  # prepare -> charge -> ship

    def test_a_run_deadline_path_is_drawn_dashed_from_the_start(self):
        diagram = draw(registry.get("test_run_deadline_moves"), [])

        boxes = {box.name: box for box in diagram.boxes}
        deadline = next(arrow for arrow in diagram.arrows if arrow.label == "deadline")
        assert (deadline.x2, deadline.y2) == (boxes["expire"].x, boxes["expire"].label_y)
        assert deadline.dashed


class TestQueuesAndLimits:
    def test_an_activity_shows_its_queue_and_limits_under_its_name(self):
        diagram = draw(registry.get("test_limited_map"), [])

        (box,) = diagram.boxes

        assert box.note == "limited · 10/s · 5 at once"

    def test_the_notes_and_the_deadline_arrow_are_said_in_the_readers_language(self):
        with translation.override("de"):
            (box,) = draw(registry.get("test_limited_map"), []).boxes
            arrows = draw(registry.get("test_run_deadline_moves"), []).arrows

        assert box.note == "limited · 10/s · 5 gleichzeitig"
        assert "Frist" in {arrow.label for arrow in arrows}

    def test_an_activity_without_them_shows_no_note(self):
        notes = {box.name: box.note for box in draw(registry.get("test_payments"), []).boxes}

        assert notes == {"charge": "payments", "receipt": ""}

    def test_the_picture_prints_the_note_in_the_box(self):
        diagram = draw(registry.get("test_payments"), [])

        svg = render_to_string("workflows/partials/diagram.html", {"diagram": diagram})

        assert ">payments</text>" in svg
        assert "<title>charge (activity), payments</title>" in svg
