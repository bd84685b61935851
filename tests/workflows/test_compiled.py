"""What compiled statements are written from (workflows.engine.compiled)."""

from __future__ import annotations

import pytest

from workflows.engine.compiled import ClaimedOr, Param, argument_writer, function_body
from workflows.states import StepState


class TestArgumentWriter:
    def test_a_param_is_its_argument_and_a_constant_its_sql(self):
        argument = argument_writer({"run_id": 1, "now": 2})

        assert argument(Param("now")) == "$2"
        assert argument(StepState.SCHEDULED) == "'scheduled'"
        assert argument(None) == "NULL"

    def test_a_value_that_depends_on_the_claim_is_a_case_unless_both_sides_agree(self):
        argument = argument_writer({"holder": 1, "now": 2}, claimed="$3")

        assert argument(ClaimedOr(Param("holder"), "")) == "CASE WHEN $3 THEN $1 ELSE '' END"
        assert argument(ClaimedOr(Param("now"), Param("now"))) == "$2"

    def test_a_value_that_depends_on_the_claim_needs_the_claims_argument(self):
        with pytest.raises(ValueError, match="claimed"):
            argument_writer({"holder": 1})(ClaimedOr(Param("holder"), ""))


class TestFunctionBody:
    def test_each_placeholder_is_written_in_order(self):
        argument = argument_writer({"id": 1})

        assert function_body("a = %s AND b = %s", (Param("id"), 7), argument) == "a = $1 AND b = 7"

    def test_placeholders_and_parameters_that_do_not_match_are_refused(self):
        with pytest.raises(RuntimeError, match="placeholders"):
            function_body("a = %s", (), argument_writer({}))
