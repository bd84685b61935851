"""The picture of a definition, with the run's position on it: each node carries its
step's state (its latest round's), or its undo's while the undo runs or once it failed."""

from __future__ import annotations

import pytest

from tests.workflows.test_engine import sweep_until_quiet
from workflows import registry
from workflows.diagram import UNDO_FAILED, draw

pytestmark = pytest.mark.django_db


def boxes(run) -> dict[str, tuple[str, bool]]:
    definition = registry.get(run.workflow_type, run.workflow_version)
    return {box.name: (box.state, box.current) for box in draw(definition, run.steps.all()).boxes}


class TestDraw:
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
