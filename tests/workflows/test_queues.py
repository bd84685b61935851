"""Reading rates, checking queues and limits, and deciding whether an attempt may start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workflows import queues
from workflows.dsl import Activity, Map, NoCompensation, Workflow, check_definition
from workflows.queues import Rate, admit, free_slots, parse_rate

NOW = datetime(2026, 3, 2, 9, 30, 15, 500000, tzinfo=UTC)


def noop(context):
    return None


def activity(**options) -> Activity:
    return Activity("charge", run=noop, compensate=NoCompensation("test"), **options)


def problems_of(node) -> list[str]:
    return check_definition(Workflow(name="t", version=1, start=node.name, nodes=(node,)))


class TestParseRate:
    @pytest.mark.parametrize(
        ("text", "rate"),
        [
            ("50/m", Rate(count=50, seconds=60)),
            ("3/s", Rate(count=3, seconds=1)),
            ("1000/h", Rate(count=1000, seconds=3600)),
            (" 7 / m ", Rate(count=7, seconds=60)),
        ],
    )
    def test_reads_a_count_per_second_minute_or_hour(self, text, rate):
        assert parse_rate(text) == rate

    @pytest.mark.parametrize("text", ["50", "50/min", "fifty/m", "-1/s", "1.5/s", "", "/m"])
    def test_refuses_anything_else_and_shows_the_form(self, text):
        with pytest.raises(ValueError, match="N/s, N/m or N/h"):
            parse_rate(text)

    def test_refuses_a_rate_of_zero(self):
        with pytest.raises(ValueError, match="at least 1"):
            parse_rate("0/m")

    def test_writes_itself_back_as_it_was_read(self):
        assert str(parse_rate("50/m")) == "50/m"


class TestWindow:
    def test_a_minute_window_starts_at_the_whole_minute(self):
        start, end = Rate(count=5, seconds=60).window(NOW)

        assert start == datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
        assert end == datetime(2026, 3, 2, 9, 31, tzinfo=UTC)

    def test_a_second_window_holds_only_that_second(self):
        start, end = Rate(count=5, seconds=1).window(NOW)

        assert (start, end) == (
            NOW.replace(microsecond=0),
            NOW.replace(microsecond=0) + timedelta(seconds=1),
        )


class TestAdmit:
    def test_admits_while_slots_and_the_window_have_room(self):
        decision = admit(
            rate=Rate(2, 60), concurrency=3, in_flight=2, window_start=None, window_count=0, now=NOW
        )

        assert decision.admitted

    def test_refuses_when_every_slot_is_held_and_asks_again_shortly(self):
        decision = admit(
            rate=None, concurrency=3, in_flight=3, window_start=None, window_count=0, now=NOW
        )

        assert not decision.admitted
        assert decision.reason == "concurrency"
        assert decision.retry_at == NOW + queues.CONCURRENCY_RECHECK

    def test_refuses_when_the_window_is_full_until_the_next_window(self):
        start, end = Rate(2, 60).window(NOW)

        decision = admit(
            rate=Rate(2, 60),
            concurrency=None,
            in_flight=0,
            window_start=start,
            window_count=2,
            now=NOW,
        )

        assert not decision.admitted
        assert decision.reason == "rate"
        assert decision.retry_at == end

    def test_counts_a_past_window_for_nothing(self):
        past = Rate(2, 60).window(NOW - timedelta(minutes=1))[0]

        decision = admit(
            rate=Rate(2, 60),
            concurrency=None,
            in_flight=0,
            window_start=past,
            window_count=2,
            now=NOW,
        )

        assert decision.admitted


class TestFreeSlots:
    def test_is_the_smaller_of_free_slots_and_the_rest_of_the_window(self):
        start, _ = Rate(10, 60).window(NOW)

        assert (
            free_slots(
                rate=Rate(10, 60),
                concurrency=5,
                in_flight=1,
                window_start=start,
                window_count=8,
                now=NOW,
            )
            == 2
        )
        assert (
            free_slots(
                rate=Rate(10, 60),
                concurrency=5,
                in_flight=4,
                window_start=start,
                window_count=0,
                now=NOW,
            )
            == 1
        )

    def test_is_never_negative(self):
        assert (
            free_slots(
                rate=None, concurrency=2, in_flight=5, window_start=None, window_count=0, now=NOW
            )
            == 0
        )


class TestStaticCheck:
    def test_a_queue_and_limits_that_make_sense_pass(self):
        assert problems_of(activity(queue="payments", rate_limit="50/m", concurrency=5)) == []

    def test_a_bad_rate_is_named_with_the_form_to_use(self):
        (problem,) = problems_of(activity(rate_limit="50 per minute"))

        assert "activity 'charge' has rate_limit='50 per minute'" in problem
        assert "N/s, N/m or N/h" in problem

    @pytest.mark.parametrize("concurrency", [0, -1, 2.5, True])
    def test_concurrency_must_be_a_whole_number_of_at_least_one(self, concurrency):
        (problem,) = problems_of(activity(concurrency=concurrency))

        assert f"concurrency={concurrency!r}" in problem

    @pytest.mark.parametrize("queue", ["", "pay ments", "baton.sweep"])
    def test_a_queue_must_be_a_plain_name_and_not_the_sweeps(self, queue):
        (problem,) = problems_of(activity(queue=queue))

        assert f"queue={queue!r}" in problem

    def test_a_local_activity_can_have_neither_queue_nor_limits(self):
        (problem,) = problems_of(activity(local=True, queue="payments"))

        assert "is local" in problem

    def test_a_map_is_checked_the_same_way(self):
        node = Map(
            "each",
            items=lambda data: [],
            activity=noop,
            compensate=NoCompensation("test"),
            rate_limit="often",
        )

        (problem,) = problems_of(node)

        assert "map 'each' has rate_limit='often'" in problem

    def test_a_map_over_child_workflows_takes_no_limits(self):
        node = Map("each", items=lambda data: [], workflow="child", concurrency=2)

        (problem,) = problems_of(node)

        assert "runs child workflows" in problem

    def test_a_maps_items_carry_its_queue_and_limits(self):
        node = Map(
            "each",
            items=lambda data: [],
            activity=noop,
            compensate=NoCompensation("test"),
            queue="gpu",
            rate_limit="5/s",
            concurrency=2,
        )

        item = node.item_activity

        assert (item.queue, item.rate_limit, item.concurrency) == ("gpu", "5/s", 2)


class TestEagerDispatch:
    def test_only_an_activity_of_the_default_queue_without_limits_runs_eagerly(self):
        assert queues.dispatched_eagerly(activity())
        assert not queues.dispatched_eagerly(activity(queue="payments"))
        assert not queues.dispatched_eagerly(activity(concurrency=1))
