"""pydantic's errors in the reader's language (workflows.field_errors)."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest
from django.utils import translation
from pydantic import BaseModel, Field

from workflows import field_errors


class Sample(BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = Field(min_length=2, max_length=5)
    code: str = Field(default="", pattern=r"^[A-Z]{3}$")
    count: int = Field(default=1, gt=0)
    size: Literal["s", "m"] = "s"
    lines: list[int] = Field(default_factory=list, min_length=0, max_length=1)


def errors_of(data: dict) -> dict[str, dict[str, str]]:
    with pytest.raises(pydantic.ValidationError) as invalid:
        Sample.model_validate(data)
    return {
        ".".join(map(str, error["loc"])) or "input": field_errors.described(
            error, field=".".join(map(str, error["loc"]))
        )
        for error in invalid.value.errors()
    }


BAD = {"name": "x", "code": "eur", "count": 0, "size": "xl", "lines": [1, 2], "extra": 1}


class TestDescribed:
    def test_english_says_what_pydantic_says_with_its_type(self):
        with translation.override("en"):
            errors = errors_of(BAD)

        assert {field: (error["type"], error["message"]) for field, error in errors.items()} == {
            "name": ("string_too_short", "String should have at least 2 characters"),
            "code": ("string_pattern_mismatch", "String should match pattern '^[A-Z]{3}$'"),
            "count": ("greater_than", "Input should be greater than 0"),
            "size": ("literal_error", "Input should be one of: 's' or 'm'"),
            "lines": ("too_long", "List should have at most 1 item"),
            "extra": ("extra_forbidden", "Extra inputs are not permitted"),
        }

    def test_german_says_each_with_its_numbers_and_the_same_type(self):
        with translation.override("de"):
            errors = errors_of({**BAD, "name": None})
            missing = errors_of({"code": "EUR"})

        assert errors["name"] == {
            "field": "name",
            "message": "Eingabe muss ein gültiger Text sein",
            "type": "string_type",
        }
        assert errors["count"]["message"] == "Eingabe muss größer als 0 sein"
        assert errors["lines"]["message"] == "Liste darf höchstens 1 Eintrag haben"
        assert missing["name"]["message"] == "Feld erforderlich"

    def test_a_validators_own_sentence_is_kept_without_pydantics_prefix(self):
        class Checked(BaseModel):
            when: str

            @pydantic.field_validator("when")
            @classmethod
            def not_today(cls, value: str) -> str:
                raise ValueError("must not be today")

        with pytest.raises(pydantic.ValidationError) as invalid:
            Checked.model_validate({"when": "today"})

        assert field_errors.message(invalid.value.errors()[0]) == "must not be today"

    def test_a_type_not_listed_keeps_pydantics_message(self):
        error = {"type": "url_parsing", "msg": "Input should be a valid URL", "ctx": {}}

        assert field_errors.message(error) == "Input should be a valid URL"

    def test_a_counted_error_without_its_number_keeps_pydantics_message(self):
        error = {"type": "string_too_short", "msg": "String should be longer", "ctx": {}}

        assert field_errors.message(error) == "String should be longer"
