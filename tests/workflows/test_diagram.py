"""The picture of a definition, with the run's position on it."""

from __future__ import annotations

import pytest

from workflows import registry
from workflows.diagram import draw

pytestmark = pytest.mark.django_db


class TestDrawALoop:
    def test_a_loop_is_laid_out_left_to_right_with_its_back_edge_drawn(self):
        definition = registry.get("test_looping", 1)

        diagram = draw(definition, [])

        column = {box.name: box.x for box in diagram.boxes}
        assert column["prepare"] < column["draft"] < column["check"] < column["send_back"]
        back = [arrow for arrow in diagram.arrows if arrow.x2 < arrow.x1]
        assert len(back) == 1

    def test_a_node_run_in_two_rounds_shows_its_latest_round(self, start, drive):
        run = start("test_looping", {"rounds": 2})
        drive(run, max_steps=2)  # the first draft succeeded; the second is scheduled

        diagram = draw(registry.get("test_looping", 1), run.steps.order_by("-round", "id"))

        draft = next(box for box in diagram.boxes if box.name == "draft")
        assert draft.state == "scheduled"
        assert draft.current
