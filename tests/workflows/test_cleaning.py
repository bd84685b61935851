"""The cleaning layer: what text and times from outside Baton takes, and how it says no."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workflows.cleaning import (
    EARLIEST,
    LATEST,
    Refused,
    clean_datetime,
    clean_text,
    neutralise_bidi,
    refuse_unstorable,
)


class TestCleanText:
    def test_ordinary_text_comes_back_unchanged(self):
        assert clean_text("  Team dinner, 300 €  ", max_length=80) == "  Team dinner, 300 €  "

    @pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\x7f", "\x85"])
    def test_a_control_character_is_refused_and_named(self, character):
        with pytest.raises(Refused, match=f"control characters \\(found U\\+{ord(character):04X}"):
            clean_text(f"a{character}b", max_length=80)

    def test_line_breaks_pass_only_where_the_field_takes_several_lines(self):
        assert clean_text("one\r\ntwo\tthree", max_length=80, multiline=True)
        with pytest.raises(Refused, match="U\\+000A"):
            clean_text("one\ntwo", max_length=80)

    def test_a_lone_surrogate_is_refused(self):
        with pytest.raises(Refused, match="lone surrogates"):
            clean_text("a\ud800", max_length=80)

    def test_text_over_the_limit_is_refused_saying_both_lengths(self):
        with pytest.raises(Refused, match="at most 3 characters \\(this has 4\\)"):
            clean_text("abcd", max_length=3)

    @given(st.text())
    def test_whatever_it_accepts_holds_no_control_character(self, value):
        try:
            cleaned = clean_text(value, max_length=None)
        except Refused:
            return
        assert not any(unicodedata.category(c) in ("Cc", "Cs") for c in cleaned)


class TestRefuseUnstorable:
    def test_a_nul_anywhere_in_json_is_refused_keys_included(self):
        with pytest.raises(Refused, match="NUL"):
            refuse_unstorable({"items": [{"sk\x00u": "BOOK"}]})

    def test_other_control_characters_are_data(self):
        refuse_unstorable({"note": "tab\there\x1b"})

    @pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
    def test_a_number_json_cannot_carry_is_refused(self, number):
        with pytest.raises(Refused, match="numbers must be finite"):
            refuse_unstorable({"payload": [1.5, number]})


class TestCleanDatetime:
    def test_reads_iso_8601_into_utc(self):
        assert clean_datetime("2026-11-30T12:00:00+01:00") == datetime(2026, 11, 30, 11, tzinfo=UTC)

    def test_a_naive_time_is_read_in_the_given_zone(self):
        moment = clean_datetime("2026-07-01T09:00", naive_in=ZoneInfo("Europe/Paris"))

        assert moment == datetime(2026, 7, 1, 7, tzinfo=UTC)

    def test_an_offset_past_what_postgresql_takes_becomes_utc(self):
        assert clean_datetime("2026-01-01T00:00:00+23:00") == datetime(2025, 12, 31, 1, tzinfo=UTC)

    @pytest.mark.parametrize(
        "value",
        [
            "0001-01-01T00:00:00+05:00",
            "9999-12-31T23:59:59-05:00",
            "0001-01-01T00:00:00",
            "9999-12-31",
            datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        ],
    )
    def test_a_moment_python_cannot_show_in_every_zone_is_refused(self, value):
        with pytest.raises(Refused, match="between 0001-01-02 and 9999-12-30"):
            clean_datetime(value)

    def test_a_naive_time_at_the_edge_is_refused_in_the_sites_zone_too(self):
        with pytest.raises(Refused, match="between"):
            clean_datetime("0001-01-01", naive_in=ZoneInfo("Asia/Tokyo"))

    @pytest.mark.parametrize("value", ["0.5", "1700000000", "tomorrow", "", 17])
    def test_anything_but_iso_8601_is_refused_with_an_example(self, value):
        with pytest.raises(
            Refused, match=re.escape("ISO 8601 date-time, e.g. 2026-11-30T12:00:00Z")
        ):
            clean_datetime(value)

    @given(st.text())
    def test_any_text_is_a_utc_moment_in_range_or_refused(self, value):
        try:
            moment = clean_datetime(value)
        except Refused:
            return
        assert moment.tzinfo is UTC
        assert EARLIEST <= moment <= LATEST

    @given(st.datetimes(timezones=st.timezones() | st.none()))
    def test_any_datetime_is_a_utc_moment_in_range_or_refused(self, value):
        try:
            moment = clean_datetime(value.isoformat())
        except Refused:
            return
        assert EARLIEST <= moment <= LATEST
        assert moment.astimezone(timezone(timedelta(hours=23, minutes=59)))
        assert moment.astimezone(timezone(-timedelta(hours=23, minutes=59)))


class TestNeutraliseBidi:
    def test_an_override_is_shown_as_its_code_point(self):
        assert neutralise_bidi("invoice\u202egpj.exe") == "invoice[U+202E]gpj.exe"

    def test_right_to_left_text_and_its_marks_are_left_alone(self):
        assert neutralise_bidi("שלום\u200f world") == "שלום\u200f world"
