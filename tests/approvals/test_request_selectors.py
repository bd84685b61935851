"""A person's requests, newest first by keyset, each with where it stands now."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation
from pydantic import BaseModel

from approvals import request_pages
from approvals.request_pages import RequestFilters, data_rows
from tests.conftest import ORDER_INPUT
from workflows import registry
from workflows.dsl import Activity, NoCompensation, Workflow
from workflows.engine import execute, work
from workflows.models import StepRun
from workflows.starting import start_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def send_expense(employees, drive):
    """alice's (or someone's) expense, started as from the form and run to its first task."""

    def send(user, title: str = "Train to Lyon", **input):
        run, _ = start_for(
            user=user,
            workflow_type="expense",
            input={"title": title, "amount": "120.00", "currency": "EUR", **input},
            channel="inbox",
        )
        return drive(run)

    return send


def page_of(user, limit: int = 25, **filters):
    return request_pages.my_requests(user=user, filters=RequestFilters(**filters), limit=limit)


class TestMyRequests:
    def test_pages_by_keyset_newest_first_without_repeats(self, alice, send_expense):
        runs = [send_expense(alice, title=f"Trip {n}") for n in range(5)]
        seen, cursor = [], ""

        for _ in range(3):
            page = page_of(alice, limit=2, cursor=cursor)
            seen += [row.run.pk for row in page.rows]
            cursor = page.next_cursor

        assert seen == [run.pk for run in reversed(runs)]
        assert cursor == ""

    def test_a_damaged_cursor_starts_from_the_first_page(self, alice, send_expense):
        run = send_expense(alice)

        page = page_of(alice, cursor="not-a-cursor")

        assert [row.run.pk for row in page.rows] == [run.pk]

    def test_lists_only_the_runs_the_person_started(self, alice, bob, send_expense):
        send_expense(bob)

        assert page_of(alice).rows == []

    def test_filters_by_state_and_type(self, alice, send_expense, start, drive):
        waiting = send_expense(alice)
        ended = drive(start("test_linear", {}, started_by=alice))

        assert [r.run for r in page_of(alice, state="active").rows] == [waiting]
        assert [r.run for r in page_of(alice, state="succeeded").rows] == [ended]
        assert [r.run for r in page_of(alice, workflow_type="expense").rows] == [waiting]

    def test_each_request_is_named_by_its_first_words_never_its_requester(
        self, alice, send_expense
    ):
        send_expense(alice, title="Hotel in Paris")

        (row,) = page_of(alice).rows

        assert (row.kind, row.headline, row.state) == ("expense", "Hotel in Paris", "waiting")

    def test_an_order_is_named_by_its_id_whatever_order_the_database_keeps(self, alice, start):
        start("order", {**ORDER_INPUT, "order_id": "A-7"}, started_by=alice)

        (row,) = page_of(alice).rows

        assert row.headline == "A-7"

    def test_a_state_or_type_it_does_not_know_is_ignored(self):
        assert RequestFilters.from_query({"state": "sleepy", "type": "expense"}) == (
            RequestFilters(state="", workflow_type="expense")
        )
        assert RequestFilters.from_query({"type": "ex\x00pense"}) == RequestFilters()

    @pytest.mark.parametrize(
        "cursor",
        [
            "x" * 201,
            # base64 of ["0001-01-01T00:00:00-23:59", <uuid>]: a time Python cannot show.
            "WyIwMDAxLTAxLTAxVDAwOjAwOjAwLTIzOjU5IiwgIjAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMCJd",
        ],
    )
    def test_a_cursor_it_did_not_give_out_starts_from_the_first_page(
        self, alice, send_expense, cursor
    ):
        run = send_expense(alice)

        page = request_pages.my_requests(
            user=alice, filters=RequestFilters.from_query({"cursor": cursor})
        )

        assert [row.run.pk for row in page.rows] == [run.pk]


class TestWhereNow:
    def test_a_task_for_a_person_says_who_since_when_and_due_when(self, alice, send_expense):
        run = send_expense(alice)
        task = run.human_tasks.get()

        (where,) = page_of(alice).rows[0].where

        assert where.stage == "Manager approval"
        assert where.waiting_for == "a decision by Carol"
        assert (where.since, where.due) == (task.created_at, task.due_at)

    def test_a_task_for_groups_names_the_groups(self, operator, start, drive):
        run, _ = start_for(
            user=operator,
            workflow_type="vendor_onboarding",
            input={"vendor_name": "Acme", "contact_email": "legal@acme.example"},
            channel="inbox",
        )
        drive(run)

        where = page_of(operator).rows[0].where

        assert sorted((w.stage, w.waiting_for) for w in where) == [
            ("Legal review", "a decision by the legal group"),
            ("Security review", "a decision by the security group"),
        ]

    def test_a_delegated_task_says_who_holds_it_and_who_delegated(self, alice, carol, send_expense):
        from approvals import human_tasks

        run = send_expense(alice)
        human_tasks.delegate_human_task(
            task_id=run.human_tasks.get().pk, user=carol, to_username="bob", channel="inbox"
        )

        (where,) = page_of(alice).rows[0].where

        assert where.waiting_for == "a decision by Bob (delegated by Carol)"

    def test_a_step_for_a_worker_says_so(self, alice, start):
        start("test_linear", {}, started_by=alice)

        (where,) = page_of(alice).rows[0].where

        assert (where.stage, where.waiting_for) == ("first", "a worker to pick it up")

    def test_a_map_is_one_place_saying_how_many_items_are_done(self, alice, start, drive):
        run = start("test_map", {"items": list(range(40))}, started_by=alice)
        drive(run, max_steps=3)

        (where,) = page_of(alice).rows[0].where

        assert (where.stage, where.waiting_for) == ("each", "its items (3 of 40 done)")

    def test_a_child_workflow_step_names_the_child_it_waits_for(self, alice, start, drive):
        drive(start("test_parent", {"hold": True}, started_by=alice))

        (where,) = page_of(alice).rows[0].where

        assert (where.stage, where.waiting_for) == ("call", "a test child run")

    def test_an_ended_run_says_when_it_ended(self, alice, start, drive):
        run = drive(start("test_linear", {}, started_by=alice))

        (where,) = page_of(alice).rows[0].where

        assert (where.stage, where.since) == ("ended", run.finished_at)

    def test_an_ended_request_says_how_it_was_last_decided(self, alice, carol, send_expense, drive):
        from approvals import human_tasks

        run = send_expense(alice)
        human_tasks.reject_human_task(
            task_id=run.human_tasks.get().pk, user=carol, channel="inbox", reason="Too dear"
        )
        drive(run)

        (where,) = page_of(alice).rows[0].where

        assert (where.stage, where.outcome) == ("ended", "rejected by Carol")

    def test_a_page_costs_the_same_queries_for_one_run_or_many(self, alice, send_expense):
        send_expense(alice)
        with CaptureQueriesContext(connection) as one:
            page_of(alice)
        for n in range(6):
            send_expense(alice, title=f"Trip {n}")

        with CaptureQueriesContext(connection) as many:
            page = page_of(alice)

        assert len(page.rows) == 7
        assert len(many) == len(one) == 5


ONE_AT_ONCE = Workflow(
    name="test_where_one_at_once",
    version=1,
    start="call",
    nodes=(
        Activity("call", run=lambda context: {}, compensate=NoCompensation("test"), concurrency=1),
    ),
)


class TestWhereALimitedStepWaits:
    @pytest.fixture(autouse=True)
    def one_at_once(self, monkeypatch):
        monkeypatch.setattr(work, "send_steps", lambda step_ids, **options: None)
        registry.register(ONE_AT_ONCE)
        yield
        registry.unregister(ONE_AT_ONCE)

    def test_it_names_the_limits_it_waits_within(self, start):
        first, second = (start(ONE_AT_ONCE.name, {}).steps.get().pk for _ in range(2))
        execute.claim_step(first, now=None)
        assert execute.claim_step(second, now=None) is None
        step = StepRun.objects.select_related("run").get(pk=second)

        (where,) = request_pages.positions(step.run, [step], [])

        assert where.waiting_for == "a worker to pick it up, within its limits (1 at once)"


class Trip(BaseModel):
    leaves_on: date
    boards_at: datetime


class TestValuesInTheReadersWords:
    def test_dates_and_times_are_written_in_the_readers_format_and_zone(self):
        data = {"leaves_on": "2026-12-24", "boards_at": "2026-12-24T15:30:00Z"}

        with translation.override("de"), timezone.override("Europe/Berlin"):
            rows = data_rows(data, Trip)

        assert [(row.label, row.text) for row in rows] == [
            ("Leaves on", "24.12.2026"),
            ("Boards at", "24.12.2026 16:30 CET"),
        ]

    def test_text_that_is_no_date_is_shown_as_it_is(self):
        rows = data_rows({"leaves_on": "soon", "boards_at": "2026-13-45T99:00"}, Trip)

        assert [row.text for row in rows] == ["soon", "2026-13-45T99:00"]
