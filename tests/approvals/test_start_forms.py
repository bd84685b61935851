"""Start forms drawn from input schemas: the boxes, reading them back, errors beside them."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from enum import Enum
from typing import Any, Literal

import pydantic
import pytest
from django.utils import translation
from pydantic import BaseModel, Field

from approvals import start_forms, task_forms
from approvals.examples import EXPENSE, VENDOR_ONBOARDING
from approvals.start_forms import FieldSpec, ListSpec, MapSpec
from workflows.dsl import InvalidInput, Workflow
from workflows.examples.order import ORDER


class Colour(Enum):
    RED = "red"
    DARK_GREEN = "dark_green"


class Line(BaseModel):
    sku: str = Field(min_length=1, max_length=64, title="SKU")
    quantity: int = Field(ge=1, le=99)


class Sample(BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=80, description="what it is for")
    notes: str = Field(default="", max_length=2000)
    amount: Decimal
    due_on: date | None = None
    colour: Colour = Colour.RED
    size: Literal["s", "m", "l"]
    urgent: bool = False
    lines: list[Line] = Field(min_length=1, max_length=5)
    tags: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)


SAMPLE = Workflow(name="sample", version=1, start="a", nodes=(), input_schema=Sample)


def spec_of(form: start_forms.FormSpec, name: str):
    return next(item for item in form.fields if item.name == name)


POSTED = {
    "title": "  Chairs ",
    "notes": "",
    "amount": "12.50",
    "due_on": "2031-02-03",
    "colour": "dark_green",
    "size": "m",
    "urgent": "on",
    "lines-rows": "3",
    "lines-0-sku": "CH-1",
    "lines-0-quantity": "4",
    "lines-1-sku": "",
    "lines-1-quantity": "",
    "lines-2-sku": "CH-2",
    "lines-2-quantity": "1",
    "tags-rows": "1",
    "tags-0": "",
}


class TestSpecFor:
    def test_labels_come_from_names_or_explicit_titles(self):
        form = start_forms.spec_for(Sample)

        assert spec_of(form, "due_on").label == "Due on"
        assert spec_of(form, "lines").columns[0].label == "SKU"

    def test_help_comes_from_descriptions(self):
        assert spec_of(start_forms.spec_for(Sample), "title").help == "What it is for"

    def test_required_fields_are_marked_and_optional_ones_not(self):
        form = start_forms.spec_for(Sample)

        assert [item.name for item in form.fields if item.required] == [
            "title",
            "amount",
            "size",
            "lines",
        ]

    def test_choices_come_from_literals_and_enums(self):
        form = start_forms.spec_for(Sample)

        assert spec_of(form, "size").choices == (("s", "s"), ("m", "m"), ("l", "l"))
        assert spec_of(form, "colour").choices == (("red", "red"), ("dark_green", "dark green"))
        assert spec_of(form, "colour").initial == "red"

    def test_each_kind_of_value_gets_a_box_that_fits(self):
        form = start_forms.spec_for(Sample)

        widgets = {item.name: item.widget for item in form.fields if isinstance(item, FieldSpec)}
        assert widgets == {
            "title": "text",
            "notes": "textarea",
            "amount": "decimal",
            "due_on": "date",
            "colour": "select",
            "size": "select",
            "urgent": "checkbox",
        }

    def test_a_list_of_objects_is_rows_of_columns(self):
        lines = spec_of(start_forms.spec_for(Sample), "lines")

        assert isinstance(lines, ListSpec)
        assert [(c.name, c.widget, c.required) for c in lines.columns] == [
            ("sku", "text", True),
            ("quantity", "integer", True),
        ]
        assert (lines.min_rows, lines.max_rows) == (1, 5)

    def test_a_field_no_box_fits_is_left_to_the_api(self):
        form = start_forms.spec_for(Sample)

        assert (form.left_out, form.usable) == (("extra",), True)

    def test_a_required_field_no_box_fits_keeps_the_type_out_of_the_browser(self):
        class Odd(BaseModel):
            payload: dict[str, Any]

        form = start_forms.spec_for(Odd)

        assert (form.cannot_fill, form.usable) == (("payload",), False)

    def test_the_shipped_order_has_item_rows_a_decimal_and_simulation_choices(self):
        form = start_forms.spec_for(ORDER.input_schema)

        items, simulate = spec_of(form, "items"), spec_of(form, "simulate")
        assert [column.label for column in items.columns] == ["SKU", "Quantity"]
        assert spec_of(form, "amount").widget == "decimal"
        assert spec_of(form, "customer_email").widget == "email"
        assert isinstance(simulate, MapSpec)
        assert simulate.keys[0].name == "inventory"
        assert ("decline", "decline") in simulate.keys[0].choices

    def test_fields_the_server_fills_in_are_left_out(self):
        form = start_forms.spec_for(EXPENSE.input_schema, leave_out=("requester",))

        assert [item.name for item in form.fields] == [
            "title",
            "amount",
            "currency",
            "description",
            "bank_account",
        ]


class TestRead:
    def test_the_boxes_become_the_input_the_api_takes(self):
        data, _ = start_forms.read(start_forms.spec_for(Sample), POSTED)

        assert data == {
            "title": "Chairs",
            "amount": "12.50",
            "due_on": "2031-02-03",
            "colour": "dark_green",
            "size": "m",
            "urgent": True,
            "lines": [{"sku": "CH-1", "quantity": 4}, {"sku": "CH-2", "quantity": 1}],
        }
        assert Sample.model_validate(data).lines[1].sku == "CH-2"

    def test_what_was_typed_is_kept_to_show_again(self):
        _, form = start_forms.read(start_forms.spec_for(Sample), POSTED)

        assert (form.values["title"], form.values["lines-2-sku"]) == ("Chairs", "CH-2")
        assert form.rows["lines"] == 3

    def test_a_box_that_is_not_a_number_is_passed_on_for_the_schema_to_refuse(self):
        data, _ = start_forms.read(
            start_forms.spec_for(Sample), {**POSTED, "lines-0-quantity": "four"}
        )

        assert data["lines"][0]["quantity"] == "four"

    def test_text_the_database_cannot_hold_is_refused_beside_its_box(self):
        data, form = start_forms.read(
            start_forms.spec_for(Sample), {**POSTED, "title": "Chairs\x00", "lines-0-sku": "C\x1b"}
        )

        assert "title" not in data
        assert form.errors == {
            "title": "Title must not contain control characters (found U+0000 at position 7).",
            "lines-0-sku": "SKU must not contain control characters (found U+001B at position 2).",
        }
        assert (form.values["title"], form.values["lines-0-sku"]) == ("Chairs", "C")

    def test_line_breaks_are_kept_in_long_text(self):
        data, form = start_forms.read(
            start_forms.spec_for(Sample), {**POSTED, "notes": "One\r\nTwo"}
        )

        assert (data["notes"], form.errors) == ("One\r\nTwo", {})

    def test_a_forged_row_count_is_kept_within_the_lists_bounds(self):
        _, form = start_forms.read(start_forms.spec_for(Sample), {**POSTED, "lines-rows": "999"})

        assert form.rows["lines"] == 5


class TestRows:
    def test_adding_gives_the_list_one_more_blank_row_and_keeps_the_rest(self):
        _, form = start_forms.read(start_forms.spec_for(Sample), POSTED)

        grown = start_forms.with_rows(form, add="lines")

        rows = grown.group("lines").rows
        assert len(rows) == 4
        assert [box.value for box in rows[3].boxes] == ["", ""]
        assert rows[0].boxes[0].value == "CH-1"

    def test_removing_a_row_moves_the_ones_below_up(self):
        _, form = start_forms.read(start_forms.spec_for(Sample), POSTED)

        shrunk = start_forms.with_rows(form, remove="lines-0")

        assert [row.boxes[0].value for row in shrunk.group("lines").rows] == ["", "CH-2"]

    def test_a_list_never_shows_fewer_rows_than_it_needs(self):
        form = start_forms.blank(start_forms.spec_for(Sample))

        same = start_forms.with_rows(form, remove="lines-0")

        assert len(same.group("lines").rows) == 1
        assert not same.group("lines").can_remove


class TestErrors:
    def errors_for(self, posted: dict[str, str]) -> start_forms.Form:
        data, form = start_forms.read(start_forms.spec_for(Sample), posted)
        with pytest.raises(InvalidInput) as invalid:
            SAMPLE.validate_input(data)
        return start_forms.with_errors(form, invalid.value.errors)

    def test_each_error_sits_beside_its_box_in_plain_words(self):
        form = self.errors_for({**POSTED, "title": "", "size": "xl", "amount": "lots"})

        assert form.errors == {
            "title": "This is required.",
            "size": "Choose one of the options.",
            "amount": "Enter a number.",
        }

    def test_an_error_in_a_row_points_at_the_row_shown_even_after_a_blank_one(self):
        form = self.errors_for({**POSTED, "lines-2-quantity": "0"})

        assert form.errors == {"lines-2-quantity": "Input should be greater than or equal to 1."}

    def test_an_empty_required_list_says_so_at_the_list(self):
        form = self.errors_for(
            {**POSTED, "lines-rows": "1", "lines-0-sku": "", "lines-0-quantity": ""}
        )

        assert form.errors == {"lines": "Add at least 1."}

    def test_an_error_about_a_field_not_on_the_form_goes_above_it_with_its_name(self):
        spec = start_forms.spec_for(EXPENSE.input_schema, leave_out=("requester",))
        _, form = start_forms.read(spec, {})

        shown = start_forms.with_errors(
            form, [{"field": "requester", "message": "Value error, eve has no manager"}]
        )

        assert shown.form_errors == ("Requester: eve has no manager.",)


@pytest.mark.parametrize(
    ("kind", "message", "words"),
    [
        ("missing", "Field required", "This is required."),
        ("int_parsing", "Input should be a valid integer", "Enter a whole number."),
        (
            "literal_error",
            "Input should be one of: 'flaky' or 'slow'",
            "Choose one of the options.",
        ),
        ("value_error", "must be greater than zero", "Must be greater than zero."),
        (
            "date_from_datetime_parsing",
            "Input should be a valid date",
            "Enter a date (YYYY-MM-DD).",
        ),
        ("greater_than", "Input should be greater than 0", "Input should be greater than 0."),
    ],
)
def test_pydantic_errors_are_said_in_plain_words_by_their_type(kind, message, words):
    assert start_forms.plain({"field": "x", "message": message, "type": kind}) == words


def test_a_pattern_mismatch_says_what_is_expected_from_the_description():
    amount = FieldSpec(name="amount", label="Amount", help="An amount with two decimals")
    error = {"field": "amount", "message": "", "type": "string_pattern_mismatch"}

    assert start_forms.plain(error, amount) == "Enter an amount with two decimals."


class TestInGerman:
    def test_the_shipped_types_labels_and_help_are_german(self):
        with translation.override("de"):
            spec = start_forms.spec_for(EXPENSE.input_schema, leave_out=("requester",))
            shown = {field.name: (str(field.label), str(field.help)) for field in spec.fields}

        assert shown["title"] == ("Titel", "Wofür die Ausgabe war")
        assert shown["amount"][0] == "Betrag"
        assert shown["amount"][1].startswith("Einen Betrag mit höchstens zwei Nachkommastellen")

    def test_the_same_form_reads_english_for_an_english_reader(self):
        with translation.override("en"):
            spec = start_forms.spec_for(EXPENSE.input_schema, leave_out=("requester",))
            shown = {field.name: (str(field.label), str(field.help)) for field in spec.fields}

        assert shown["title"] == ("Title", "What it was for")

    def test_a_choices_options_read_as_the_type_labels_them(self):
        with translation.override("de"):
            spec = task_forms.spec_of(VENDOR_ONBOARDING.node("legal_review"))
            risk = next(field for field in spec.fields if field.name == "risk_level")
            options = [(value, str(label)) for value, label in risk.choices]

        assert options == [("low", "niedrig"), ("medium", "mittel"), ("high", "hoch")]

    def test_each_error_is_said_in_german_beside_its_box(self):
        with translation.override("de"):
            form = TestErrors().errors_for(
                {**POSTED, "title": "", "amount": "lots", "lines-2-quantity": "0"}
            )

        assert form.errors == {
            "title": "Das ist nötig.",
            "amount": "Geben Sie eine Zahl ein.",
            "lines-2-quantity": "Eingabe muss größer als oder gleich 1 sein.",
        }
