"""The inbox's "Decided by me" tab: the tasks I decided, newest first, paged by keyset, each
with my decision and what became of the request since."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals import human_tasks
from approvals.inbox import decided
from approvals.states import Channel

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def carols_decisions(carol, start_expense, drive):
    """carol approved "Trip 0" to "Trip 3", an hour apart, and rejected "Trip 4" last;
    the approved runs went on to the end."""
    start = timezone.now() - timedelta(days=1)
    for n in range(5):
        run = start_expense(title=f"Trip {n}")
        task = run.human_tasks.get()
        when = start + timedelta(hours=n)
        if n < 4:
            human_tasks.approve_human_task(
                task_id=task.pk, user=carol, channel=Channel.INBOX, now=when
            )
        else:
            human_tasks.reject_human_task(
                task_id=task.pk, user=carol, channel=Channel.INBOX, reason="Too dear", now=when
            )
        drive(run)
    return carol


def titles(tasks) -> list[str]:
    return [task.title.split(":")[1].split("—")[0].strip() for task in tasks]


class TestDecidedBy:
    def test_lists_my_decisions_newest_first(self, carols_decisions):
        page = decided.decided_by(user=carols_decisions)

        assert titles(page.tasks) == ["Trip 4", "Trip 3", "Trip 2", "Trip 1", "Trip 0"]
        assert [task.outcome for task in page.tasks] == ["rejected", *["approved"] * 4]

    def test_each_task_comes_with_its_runs_state_now(self, carols_decisions):
        page = decided.decided_by(user=carols_decisions)

        # The expense type tells the requester of a rejection, then ends.
        assert {task.run.state for task in page.tasks} == {"succeeded"}

    def test_the_runs_state_is_read_now_not_kept_from_the_decision(
        self, carol, bob, start_expense, drive
    ):
        run = start_expense(amount="5000.00")
        human_tasks.approve_human_task(
            task_id=run.human_tasks.get().pk, user=carol, channel=Channel.INBOX
        )
        drive(run)
        waiting = decided.decided_by(user=carol).tasks[0].run.state
        finance = run.human_tasks.get(state="open")
        human_tasks.approve_human_task(
            task_id=finance.pk, user=bob, channel=Channel.INBOX, values={"cost_centre": "FIN-1200"}
        )
        drive(run)

        (task,) = decided.decided_by(user=carol).tasks

        assert (waiting, task.run.state) == ("waiting", "succeeded")

    def test_pages_by_keyset_through_every_decision_once(self, carols_decisions):
        first = decided.decided_by(user=carols_decisions, limit=2)
        second = decided.decided_by(user=carols_decisions, cursor=first.next_cursor, limit=2)
        third = decided.decided_by(user=carols_decisions, cursor=second.next_cursor, limit=2)

        assert titles(first.tasks + second.tasks + third.tasks) == [
            "Trip 4",
            "Trip 3",
            "Trip 2",
            "Trip 1",
            "Trip 0",
        ]
        assert third.next_cursor == ""

    def test_holds_only_the_viewers_own_decisions(self, carols_decisions, bob, manager_task):
        assert decided.decided_by(user=bob).tasks == []

    def test_an_open_task_is_not_a_decision(self, carol, manager_task):
        assert decided.decided_by(user=carol).tasks == []

    def test_a_cursor_it_did_not_give_out_is_refused(self, carol):
        with pytest.raises(decided.BadCursor):
            decided.decided_by(user=carol, cursor="bm90LWEtY3Vyc29y")

    def test_a_page_costs_one_query_whatever_its_length(self, carols_decisions):
        with CaptureQueriesContext(connection) as queries:
            page = decided.decided_by(user=carols_decisions)
            [(task.run.state, task.assignee, task.decided_by) for task in page.tasks]

        assert len(queries) == 1


class TestDecidedTabPage:
    def test_shows_each_decision_with_its_outcome_and_the_requests_state_now(
        self, client, carols_decisions
    ):
        client.force_login(carols_decisions)

        response = client.get(reverse("approvals:inbox"), {"tab": "decided"})

        assert response.status_code == 200
        rows = [
            " ".join(re.sub(r"<[^>]+>", " ", row).split())
            for row in response.text.split('<tr id="decided-')[1:]
        ]
        assert len(rows) == 5
        assert "Trip 4" in rows[0]
        assert "Rejected Too dear" in rows[0]
        assert "Trip 3" in rows[1]
        assert "Approved" in rows[1]
        assert rows[1].endswith("Succeeded")
        current = re.search(r'<a [^>]*aria-current="page"[^>]*>\s*([^<]+)', response.text)
        assert current.group(1).strip() == "Decided by me"

    def test_offers_no_actions_but_its_own_filters(self, client, carols_decisions):
        client.force_login(carols_decisions)

        response = client.get(reverse("approvals:inbox"), {"tab": "decided"})

        assert "Approve selected" not in response.text
        assert 'role="search"' in response.text
        assert '<select name="outcome">' in response.text
        assert 'name="priority"' not in response.text

    def test_filters_by_outcome_type_and_words_of_the_title(self, client, carols_decisions):
        client.force_login(carols_decisions)

        def shown(**query: str) -> list[str]:
            response = client.get(reverse("approvals:inbox"), {"tab": "decided", **query})
            assert response.status_code == 200
            return titles(response.context["decided_page"].tasks)

        assert shown(outcome="rejected") == ["Trip 4"]
        assert shown(q="trip 2") == ["Trip 2"]
        assert shown(type="expense", outcome="approved") == ["Trip 3", "Trip 2", "Trip 1", "Trip 0"]
        assert shown(type="vendor_onboarding") == []
        assert shown(q="%") == []  # a wildcard is a character like any other

    def test_a_filter_that_matches_nothing_says_so(self, client, carols_decisions):
        client.force_login(carols_decisions)

        response = client.get(reverse("approvals:inbox"), {"tab": "decided", "q": "zeppelin"})

        assert "None of your decisions matches these filters." in response.text
        assert "(on)" in response.text

    def test_an_unknown_outcome_is_ignored_and_refused_text_is_400(self, client, carols_decisions):
        client.force_login(carols_decisions)

        ignored = client.get(reverse("approvals:inbox"), {"tab": "decided", "outcome": "maybe"})
        refused = client.get(reverse("approvals:inbox"), {"tab": "decided", "q": "a\x00b"})

        assert len(ignored.context["decided_page"].tasks) == 5
        assert refused.status_code == 400
        assert "The search" in refused.text

    def test_the_next_page_keeps_the_filters(self, client, carols_decisions, monkeypatch):
        monkeypatch.setattr(decided, "PAGE_SIZE", 2)
        client.force_login(carols_decisions)

        first = client.get(reverse("approvals:inbox"), {"tab": "decided", "outcome": "approved"})
        cursor = first.context["decided_page"].next_cursor
        second = client.get(
            reverse("approvals:inbox"), {"tab": "decided", "outcome": "approved", "cursor": cursor}
        )

        assert "outcome=approved&amp;tab=decided&amp;cursor=" in first.text
        assert titles(second.context["decided_page"].tasks) == ["Trip 1", "Trip 0"]

    def test_pages_with_a_next_link(self, client, carols_decisions, monkeypatch):
        monkeypatch.setattr(decided, "PAGE_SIZE", 2)
        monkeypatch.setattr(
            decided.decided_by.__wrapped__, "__kwdefaults__", {"cursor": "", "limit": 2}
        )
        client.force_login(carols_decisions)

        first = client.get(reverse("approvals:inbox"), {"tab": "decided"})
        cursor = first.context["decided_page"].next_cursor
        second = client.get(reverse("approvals:inbox"), {"tab": "decided", "cursor": cursor})

        assert 'rel="next"' in first.text
        assert titles(second.context["decided_page"].tasks) == ["Trip 2", "Trip 1"]

    def test_a_damaged_cursor_starts_from_the_first_page(self, client, carols_decisions):
        client.force_login(carols_decisions)

        response = client.get(reverse("approvals:inbox"), {"tab": "decided", "cursor": "x"})

        assert response.status_code == 200
        assert "here is the first page" in response.text
        assert len(response.context["decided_page"].tasks) == 5

    def test_the_other_tabs_link_to_it(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"))

        assert "tab=decided" in response.text
        assert "Decided by me" in response.text

    def test_its_query_count_does_not_grow_with_its_rows(self, client, carol, start_expense, drive):
        client.force_login(carol)

        def decide_one(n: int) -> None:
            run = start_expense(title=f"More {n}")
            human_tasks.approve_human_task(
                task_id=run.human_tasks.get().pk, user=carol, channel=Channel.INBOX
            )

        decide_one(0)
        with CaptureQueriesContext(connection) as few:
            client.get(reverse("approvals:inbox"), {"tab": "decided"})
        for n in range(1, 8):
            decide_one(n)

        with CaptureQueriesContext(connection) as many:
            response = client.get(reverse("approvals:inbox"), {"tab": "decided"})

        assert len(response.context["decided_page"].tasks) == 8
        assert len(many) == len(few)
