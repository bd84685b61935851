"""The console's list of human tasks, as olga (an operator), carol (who manages
finance) and eve (an outsider) see it: who gets in, each filter, the rows, pages."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, time, timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.console import sla as sla_selectors
from approvals.console import task_selectors as console_task_selectors
from approvals.models import HumanTask
from approvals.states import Outcome, TaskState
from tests.approvals.test_sla_selectors import finished

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def as_user():
    def signed_in(user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return signed_in


@pytest.fixture
def olga_client(as_user, operator) -> Client:
    operator.is_staff = True
    operator.save()
    return as_user(User.objects.get(pk=operator.pk))


@pytest.fixture
def some_tasks(make_task, manager_task, groups, alice, bob, carol, now):
    """Besides carol's manager task (claimed, no due time): an overdue task in finance's
    queue, one due soon that bob holds (offered to finance too), one in legal's queue
    with no due time, one bob delegated to alice, and one of each ending: approved by
    carol today, rejected by bob yesterday, expired, cancelled."""
    manager_task.title = "Manager"
    manager_task.save()
    return {
        "late": make_task(
            groups=[groups["finance"]], due_at=now - timedelta(hours=3), title="Late"
        ),
        "soon": make_task(
            state=TaskState.CLAIMED,
            assignee=bob,
            groups=[groups["finance"]],
            due_at=now + timedelta(hours=2),
            title="Soon",
        ),
        "whenever": make_task(groups=[groups["legal"]], title="Whenever", workflow_type="order"),
        "handed": make_task(state=TaskState.DELEGATED, assignee=alice, owner=bob, title="Handed"),
        "approved": make_task(
            state=TaskState.COMPLETED,
            outcome=Outcome.APPROVED,
            groups=[groups["finance"]],
            assignee=bob,
            decided_by=carol,
            decided_at=now,
            completed_at=now,
            title="Approved",
        ),
        "rejected": make_task(
            state=TaskState.COMPLETED,
            outcome=Outcome.REJECTED,
            groups=[groups["legal"]],
            decided_by=bob,
            decided_at=now - timedelta(days=1),
            completed_at=now - timedelta(days=1),
            title="Rejected",
        ),
        "expired": make_task(
            state=TaskState.EXPIRED, assignee=bob, completed_at=now, title="Expired"
        ),
        "cancelled": make_task(state=TaskState.CANCELLED, completed_at=now, title="Cancelled"),
    }


def titles(response) -> set[str]:
    assert response.status_code == 200, response.text
    return {row.task.title for row in response.context["page"].rows}


def problems(response) -> tuple[str, ...]:
    return response.context["filters"].problems


class TestWhoSeesIt:
    def test_an_operator_sees_every_task_open_and_decided(self, olga_client, some_tasks):
        response = olga_client.get("/console/tasks/")

        assert titles(response) == {"Manager", *(task.title for task in some_tasks.values())}

    def test_an_outsider_is_refused_saying_why(self, as_user, eve, some_tasks):
        response = as_user(eve).get("/console/tasks/")

        assert response.status_code == 403
        assert "The task list is for operators and for group managers" in response.text
        assert "you manage no group" in response.text

    def test_someone_signed_out_is_sent_to_sign_in(self, client):
        response = client.get("/console/tasks/")

        assert response.status_code == 302
        assert response.url.startswith("/accounts/login/")

    def test_a_group_manager_sees_the_tasks_offered_to_their_groups_and_no_run_links(
        self, as_user, carol, some_tasks
    ):
        response = as_user(carol).get("/console/tasks/")

        assert titles(response) == {"Late", "Soon", "Approved"}
        assert "the groups you manage" in response.text
        assert "/console/runs/" not in response.text
        assert response.context["filters"].groups == ("finance",)

    def test_a_group_manager_naming_a_group_they_do_not_manage_is_told_so(
        self, as_user, carol, some_tasks
    ):
        response = as_user(carol).get("/console/tasks/", {"group": "legal"})

        assert problems(response) == ("You manage no group 'legal'; showing your groups' tasks.",)
        assert titles(response) == {"Late", "Soon", "Approved"}


class TestFilters:
    def test_live_is_every_open_claimed_or_delegated_task(self, olga_client, some_tasks):
        response = olga_client.get("/console/tasks/", {"state": "live"})

        assert titles(response) == {"Manager", "Late", "Soon", "Whenever", "Handed"}

    @pytest.mark.parametrize(
        ("state", "expected"),
        [
            ("open", {"Late", "Whenever"}),
            ("claimed", {"Manager", "Soon"}),
            ("delegated", {"Handed"}),
            ("completed", {"Approved", "Rejected"}),
            ("expired", {"Expired"}),
            ("cancelled", {"Cancelled"}),
        ],
    )
    def test_each_of_the_models_states_finds_its_own(
        self, olga_client, some_tasks, state, expected
    ):
        assert titles(olga_client.get("/console/tasks/", {"state": state})) == expected

    def test_a_group_finds_every_task_offered_to_it_and_its_queue_the_open_ones(
        self, olga_client, some_tasks
    ):
        offered = olga_client.get("/console/tasks/", {"group": "finance"})
        queue = olga_client.get("/console/tasks/", {"group": "finance", "state": "open"})

        assert titles(offered) == {"Late", "Soon", "Approved"}
        assert titles(queue) == {"Late"}

    def test_a_person_is_who_holds_a_live_task_or_decided_a_completed_one(
        self, olga_client, some_tasks
    ):
        def of(person: str, **extra: str) -> set[str]:
            return titles(olga_client.get("/console/tasks/", {"person": person, **extra}))

        # bob holds Soon, held Expired when it ended, and decided Rejected; he also
        # held Approved, which carol decided, and delegated Handed to alice.
        assert of("bob") == {"Soon", "Expired", "Rejected"}
        assert of("bob", state="live") == {"Soon"}
        assert of("bob", state="completed") == {"Rejected"}
        assert of("carol", state="completed") == {"Approved"}
        assert of("alice", state="live") == {"Handed"}

    def test_a_workflow_type(self, olga_client, some_tasks):
        assert titles(olga_client.get("/console/tasks/", {"type": "order"})) == {"Whenever"}

    def test_an_sla_state_is_a_live_tasks_by_the_dashboards_rule(self, olga_client, some_tasks):
        def sla(state: str) -> set[str]:
            return titles(olga_client.get("/console/tasks/", {"sla": state}))

        assert sla("overdue") == {"Late"}
        assert sla("due_soon") == {"Soon"}
        assert sla("on_time") == {"Manager", "Whenever", "Handed"}

    def test_decided_on_a_day_takes_that_whole_utc_day(self, olga_client, make_task, carol, now):
        today = now.astimezone(UTC).date()
        midnight = datetime.combine(today, time.min, tzinfo=UTC)
        for title, at in [
            ("At midnight", midnight),
            ("Just before", midnight - timedelta(microseconds=1)),
            ("Two days ago", midnight - timedelta(days=2)),
        ]:
            make_task(
                state=TaskState.COMPLETED,
                decided_by=carol,
                decided_at=at,
                completed_at=at,
                title=title,
            )
        yesterday = (today - timedelta(days=1)).isoformat()

        def decided(**days: str) -> set[str]:
            return titles(olga_client.get("/console/tasks/", days))

        assert decided(decided_from=today.isoformat(), decided_to=today.isoformat()) == {
            "At midnight"
        }
        assert decided(decided_from=yesterday, decided_to=yesterday) == {"Just before"}
        assert decided(decided_to=yesterday) == {"Just before", "Two days ago"}

    @pytest.mark.parametrize(
        ("query", "problem"),
        [
            ({"sla": "late"}, "There is no SLA state 'late'"),
            ({"state": "done"}, "There is no task state 'done'"),
            ({"decided_from": "yesterday"}, "Decided from must be a date such as 2026-12-01"),
            ({"decided_to": "2026-02-30"}, "Decided until must be a date such as 2026-12-01"),
            ({"group": "nobody"}, "There is no group 'nobody'; showing every group."),
            ({"person": "nobody"}, "There is no user 'nobody'; showing everyone's tasks."),
        ],
    )
    def test_a_value_it_cannot_read_is_left_out_saying_why(
        self, olga_client, some_tasks, query, problem
    ):
        response = olga_client.get("/console/tasks/", query)

        assert response.status_code == 200
        assert [text for text in problems(response) if text.startswith(problem)]
        assert problem.replace("'", "&#x27;") in response.text
        assert len(titles(response)) == len(some_tasks) + 1

    def test_filters_that_leave_no_task_say_why(self, olga_client, some_tasks):
        response = olga_client.get("/console/tasks/", {"state": "completed", "sla": "overdue"})

        assert titles(response) == set()
        assert problems(response) == (
            "These filters leave no task: an SLA state is a live task's, and a decision day "
            "a completed task's.",
        )


class TestRows:
    def test_a_decided_row_says_how_who_and_when_and_links_to_the_task_and_its_run(
        self, olga_client, some_tasks
    ):
        approved = some_tasks["approved"]

        response = olga_client.get("/console/tasks/", {"state": "completed", "person": "carol"})

        row = response.text[response.text.index(f'id="task-{approved.pk}"') :]
        row = row[: row.index("</tr>")]
        assert f'href="/tasks/{approved.pk}/">Approved</a>' in row
        assert f'href="/console/runs/{approved.run_id}/">its run</a>' in row
        assert "approved by carol" in row
        assert "finance" in row
        assert "with bob" in row

    def test_a_live_row_shows_its_due_time_and_sla_badge(self, olga_client, some_tasks):
        late = some_tasks["late"]

        response = olga_client.get("/console/tasks/", {"sla": "overdue"})

        [row] = response.context["page"].rows
        assert (row.task, row.groups, row.sla) == (late, ["finance"], "overdue")
        assert '<span class="sla-overdue">Overdue</span>' in response.text

    def test_every_cell_says_its_column_for_when_the_table_stacks_on_a_phone(
        self, olga_client, some_tasks
    ):
        response = olga_client.get("/console/tasks/", {"state": "live"})

        body = response.text[response.text.index("<tbody>") : response.text.index("</tbody>")]
        assert body.count("<td") == body.count("<td data-label=") == 5 * 7


class TestKeysetPages:
    @pytest.fixture
    def many(self, make_task):
        return [
            make_task(title=f"Task {n:02}") for n in range(console_task_selectors.PAGE_SIZE + 5)
        ]

    def test_pages_follow_each_other_newest_first_without_gaps_or_repeats(self, olga_client, many):
        first = olga_client.get("/console/tasks/", {"state": "open"})
        cursor = first.context["page"].next_cursor
        second = olga_client.get("/console/tasks/", {"state": "open", "cursor": cursor})

        seen = [row.task for row in first.context["page"].rows + second.context["page"].rows]
        assert seen == sorted(many, key=lambda task: (task.created_at, task.pk), reverse=True)
        assert second.context["page"].next_cursor == ""
        assert 'rel="next"' in first.text
        assert "state=open&amp;cursor=" in first.text

    def test_a_page_costs_the_same_queries_however_many_tasks(
        self, olga_client, make_task, groups, bob, carol, now, django_assert_num_queries
    ):
        query = {"group": "finance", "person": "bob", "state": "live", "sla": "overdue"}

        def page() -> int:
            with CaptureQueriesContext(connection) as captured:
                response = olga_client.get("/console/tasks/", query)
            assert response.status_code == 200
            return len(captured)

        def bobs_overdue_finance_task(hours: int) -> None:
            make_task(
                state=TaskState.CLAIMED,
                assignee=bob,
                groups=[groups["finance"], groups["legal"]],
                due_at=now - timedelta(hours=hours),
            )

        bobs_overdue_finance_task(1)
        few = page()
        for n in range(30):
            bobs_overdue_finance_task(n + 2)
            make_task(state=TaskState.COMPLETED, decided_by=carol, decided_at=now)

        assert page() == few
        # The selectors' part: the groups and the person named, the page, its groups.
        filters = console_task_selectors.read_filters(query, group_ids=None)
        with django_assert_num_queries(2):
            console_task_selectors.read_filters(query, group_ids=None)
        with django_assert_num_queries(2):
            page_read = console_task_selectors.tasks_page(
                filters=filters, group_ids=None, now=timezone.now()
            )
        assert len(page_read.rows) == console_task_selectors.PAGE_SIZE
        assert HumanTask.objects.count() > 60

    def test_htmx_gets_the_list_alone(self, olga_client, some_tasks):
        response = olga_client.get(
            "/console/tasks/",
            {"state": "open"},
            headers={"HX-Request": "true", "HX-Target": "task-list"},
        )

        assert response.text.lstrip().startswith('<section id="task-list"')
        assert "Late" in response.text


class TestQuickLinks:
    def test_the_runs_list_links_to_the_tasks_beside_the_sla_dashboard(self, olga_client):
        response = olga_client.get("/console/")

        assert (
            '<a href="/console/sla/">SLA dashboard</a> ·\n  <a href="/console/tasks/">Tasks</a>'
            in (response.text)
        )


LINKED_COUNT = re.compile(r'<a href="(/console/tasks/\?[^"]*)">(\d+)</a>')


def linked_counts(page: str) -> dict[str, int]:
    """Each task list the SLA dashboard links a number to, and that number."""
    return {html.unescape(url): int(count) for url, count in LINKED_COUNT.findall(page)}


def listed(client: Client, url: str) -> int:
    """How many tasks the list at `url` shows, page after page."""
    rows, cursor = 0, ""
    while True:
        page = client.get(url + (f"&cursor={cursor}" if cursor else "")).context["page"]
        rows += len(page.rows)
        if not (cursor := page.next_cursor):
            return rows


class TestTheSlaDashboardsNumbersOpenTheirTasks:
    @pytest.fixture
    def board(self, make_task, manager_task, groups, alice, bob, carol, now):
        """Ten live tasks (carol's manager task among them) of two types in three
        groups' queues or held by bob, alice and carol, decisions over a month, and
        tasks that ended without one: no two of the numbers checked below agree."""
        finance, legal, security = groups["finance"], groups["legal"], groups["security"]
        late, soon, later = (
            now - timedelta(hours=2),
            now + timedelta(hours=5),
            now + timedelta(days=3),
        )
        make_task(groups=[finance], due_at=late)
        make_task(groups=[finance])
        make_task(groups=[finance], due_at=later, workflow_type="order")
        make_task(groups=[legal], due_at=late, workflow_type="order")
        make_task(groups=[finance, security], due_at=soon)
        make_task(state=TaskState.CLAIMED, assignee=bob, groups=[finance], due_at=late)
        make_task(
            state=TaskState.CLAIMED,
            assignee=bob,
            groups=[finance],
            due_at=soon,
            workflow_type="order",
        )
        make_task(state=TaskState.DELEGATED, assignee=bob, owner=carol)
        make_task(state=TaskState.CLAIMED, assignee=alice, groups=[legal], due_at=late)
        for days_ago, decider, workflow_type in [
            (0, carol, "expense"),
            (0, bob, "expense"),
            (2, carol, "expense"),
            (5, bob, "order"),
            (5, carol, "order"),
            (5, carol, "order"),
            (10, bob, "expense"),
            (30, carol, "expense"),
        ]:
            at = now - timedelta(days=days_ago)
            make_task(
                state=TaskState.COMPLETED,
                groups=[finance],
                decided_by=decider,
                decided_at=at,
                completed_at=at,
                workflow_type=workflow_type,
            )
        make_task(state=TaskState.EXPIRED, groups=[finance], due_at=late, completed_at=now)
        make_task(state=TaskState.CANCELLED, groups=[legal], completed_at=now)
        return now.astimezone(UTC).date()

    def test_every_task_number_opens_a_list_of_that_many_tasks(self, olga_client, board):
        page = olga_client.get("/console/sla/").text
        counts = linked_counts(page)
        today = board.isoformat()

        # One of each kind, and they differ: the filters, not luck, make them agree.
        sample = {
            "expense's open tasks": counts["/console/tasks/?state=live&type=expense"],
            "finance's queue": counts["/console/tasks/?state=open&group=finance"],
            "bob's tasks": counts["/console/tasks/?state=live&person=bob"],
            "today's decisions": counts[
                f"/console/tasks/?state=completed&decided_from={today}&decided_to={today}"
            ],
            "finance's overdue": counts["/console/tasks/?state=open&group=finance&sla=overdue"],
        }
        assert sample == {
            "expense's open tasks": 7,
            "finance's queue": 4,
            "bob's tasks": 3,
            "today's decisions": 2,
            "finance's overdue": 1,
        }
        assert {url: listed(olga_client, url) for url in counts} == counts
        # All four overall, four per row of two types, three groups and three people,
        # fourteen days of decisions, and two types' decisions over the last week.
        assert len(counts) == 4 + 4 * (2 + 3 + 3) + sla_selectors.TREND_DAYS + 2

    def test_a_managers_numbers_open_lists_of_that_many_tasks_too(self, as_user, carol, board):
        client = as_user(carol)

        counts = linked_counts(client.get("/console/sla/").text)

        assert counts["/console/tasks/?state=open&group=finance"] == 4
        assert counts["/console/tasks/?state=live&type=expense"] == 4
        assert {url: listed(client, url) for url in counts} == counts

    def test_no_number_opens_the_inbox_any_more(self, olga_client, board):
        page = olga_client.get("/console/sla/").text

        assert "?tab=queue" not in page

    def test_every_cell_says_its_column_for_when_the_tables_stack_on_a_phone(
        self, olga_client, board, now
    ):
        finished(workflow_type="order", state="failed", at=now)  # the run tables show too

        page = olga_client.get("/console/sla/").text
        cells = re.findall(r"<td(?! colspan)[^>]*>", page)

        assert len(cells) > 5 * (2 + 3 + 3) + 2 * sla_selectors.TREND_DAYS + 6 + 4 + 4
        assert [cell for cell in cells if "data-label=" not in cell] == []
        css = (settings.BASE_DIR / "static" / "baton.css").read_text()
        phones = css[css.index("@media (max-width: 40rem)") :]
        assert (
            "table.tasks td[data-label]::before { content: attr(data-label)"
            in phones[: phones.index("\n}")]
        )
