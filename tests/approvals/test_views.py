"""The inbox over HTTP: pages, htmx swaps, errors in plain words, and a constant query count."""

from __future__ import annotations

import base64
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals import human_tasks, permissions
from approvals.inbox import selectors
from approvals.models import GroupManager, HumanTask, SavedFilter, Substitution
from approvals.states import TaskState

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx_target(target: str) -> dict[str, str]:
    return {**HTMX, "HTTP_HX_TARGET": target}


class TestInboxPage:
    def test_asks_for_login(self, client):
        response = client.get(reverse("approvals:inbox"))

        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")

    def test_lists_my_tasks_with_counts_per_tab(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"))

        assert response.status_code == 200
        assert "Expense: Train to Lyon — €120.00 (alice)" in response.text
        assert 'aria-label="1 tasks"' in response.text

    def test_the_queue_tab_shows_open_group_tasks(self, client, bob, carol, start_expense, drive):
        run = start_expense(amount="5000.00")
        client.force_login(carol)
        client.post(reverse("approvals:approve", args=[run.human_tasks.get().pk]))
        drive(run)
        client.force_login(bob)

        response = client.get(reverse("approvals:inbox"), {"tab": "queue"})

        assert "€5,000.00" in response.text

    def test_filters_by_search_and_priority(self, client, carol, start_expense):
        start_expense(title="Hotel in Paris")
        start_expense(title="Taxi")
        client.force_login(carol)

        found = client.get(reverse("approvals:inbox"), {"q": "hotel"})
        none = client.get(reverse("approvals:inbox"), {"priority": "4"})

        assert "Hotel in Paris" in found.text
        assert "Taxi" not in found.text
        assert "Nothing here" in none.text

    def test_keyset_pages_through_every_task_once(self, client, carol, start_expense):
        for n in range(30):
            start_expense(title=f"Trip {n:02}")
        client.force_login(carol)

        first = client.get(reverse("approvals:inbox"))
        cursor = first.context["page"].next_cursor
        second = client.get(reverse("approvals:inbox"), {"cursor": cursor})

        titles = [t.title for t in first.context["page"].tasks + second.context["page"].tasks]
        assert len(titles) == 30
        assert len(set(titles)) == 30
        assert second.context["page"].next_cursor == ""

    def test_a_damaged_cursor_starts_from_the_first_page(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"), {"cursor": "not-a-cursor"})

        assert response.status_code == 200
        assert manager_task.title in response.text

    def test_the_query_count_does_not_grow_with_the_number_of_tasks(
        self, client, carol, start_expense
    ):
        client.force_login(carol)
        start_expense(title="First")
        with CaptureQueriesContext(connection) as few:
            client.get(reverse("approvals:inbox"))
        for n in range(15):
            start_expense(title=f"More {n}")

        with CaptureQueriesContext(connection) as many:
            response = client.get(reverse("approvals:inbox"))

        assert len(response.context["page"].tasks) == 16
        assert len(many) == len(few)

    def test_polling_refreshes_just_the_list(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"), **htmx_target("task-list"))

        assert response.text.lstrip().startswith('<section id="task-list"')
        assert "<html" not in response.text


class TestDecidingFromTheInbox:
    def test_approve_swaps_the_row_and_announces_the_change(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:approve", args=[manager_task.pk]),
            {"version": manager_task.version},
            **htmx_target(f"row-{manager_task.pk}"),
        )

        assert response.status_code == 200
        assert response.text.lstrip().startswith(f'<tr id="row-{manager_task.pk}"')
        assert "Approved." in response.text
        assert "inbox-changed" in response["HX-Trigger"]

    def test_a_second_decision_gets_409_naming_the_first(self, client, carol, olga, manager_task):
        client.force_login(carol)
        client.post(reverse("approvals:approve", args=[manager_task.pk]))
        client.force_login(olga)

        response = client.post(
            reverse("approvals:reject", args=[manager_task.pk]),
            {"reason": "late"},
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 409
        assert "already approved by Carol" in response.text

    def test_reject_without_a_reason_says_so_inline(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:reject", args=[manager_task.pk]),
            {"reason": ""},
            **htmx_target("decision-panel"),
        )

        manager_task.refresh_from_db()
        assert response.status_code == 422
        assert "a reason is required" in response.text
        assert manager_task.state == TaskState.CLAIMED

    def test_a_100_kb_comment_is_refused_at_the_apis_limit(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:comment", args=[manager_task.pk]),
            {"body": "x" * 100_000},
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 422
        assert "The comment must be at most 4000 characters (this has 100000)." in response.text
        assert not manager_task.comments.exists()

    def test_a_stale_form_is_refused(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:approve", args=[manager_task.pk]),
            {"version": manager_task.version - 1},
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 409
        assert "changed since you opened it" in response.text

    def test_an_outsider_gets_404_and_a_bystander_403(self, client, eve, manager_task, carol):
        client.force_login(carol)
        client.post(reverse("approvals:delegate", args=[manager_task.pk]), {"to": "bob"})
        client.force_login(eve)
        outsider = client.post(reverse("approvals:approve", args=[manager_task.pk]), **HTMX)
        client.force_login(carol)
        bystander = client.post(reverse("approvals:approve", args=[manager_task.pk]), **HTMX)

        assert outsider.status_code == 404
        assert bystander.status_code == 403

    def test_without_htmx_the_page_redirects_with_a_message(self, client, carol, manager_task):
        client.force_login(carol)

        response = client.post(reverse("approvals:approve", args=[manager_task.pk]), follow=True)

        assert response.redirect_chain[-1][0] == reverse("approvals:task", args=[manager_task.pk])
        assert "Approved." in response.text

    def test_bulk_approve_decides_each_selected_task(self, client, carol, start_expense):
        tasks = [start_expense(title=f"Trip {n}").human_tasks.get() for n in range(3)]
        client.force_login(carol)

        response = client.post(
            reverse("approvals:bulk_approve"),
            {"task": [f"{t.pk}:{t.version}" for t in tasks]},
            follow=True,
        )

        assert "Approved 3 tasks." in response.text
        assert HumanTask.objects.filter(outcome="approved").count() == 3

    def test_snooze_hides_the_task_until_then(self, client, carol, manager_task):
        client.force_login(carol)

        client.post(
            reverse("approvals:snooze", args=[manager_task.pk]),
            {"until": "1 hour"},
            **htmx_target(f"row-{manager_task.pk}"),
        )

        assert manager_task.title not in client.get(reverse("approvals:inbox")).text


class TestTaskPage:
    def test_shows_the_data_escaped_the_timeline_the_picture_and_the_trail(
        self, client, carol, start_expense
    ):
        run = start_expense(description="<script>alert(1)</script>")
        task = run.human_tasks.get()
        client.force_login(carol)

        response = client.get(reverse("approvals:task", args=[task.pk]))

        assert response.status_code == 200
        assert "<script>alert(1)</script>" not in response.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text
        assert "Manager approval (approval): waiting" in response.text
        assert "created by baton-system" in response.text
        assert "Submit completed" in response.text

    def test_a_task_you_may_not_see_is_404(self, client, eve, manager_task):
        client.force_login(eve)

        response = client.get(reverse("approvals:task", args=[manager_task.pk]))

        assert response.status_code == 404


class TestSavedFiltersAndPicker:
    def test_a_saved_filter_is_listed_and_reapplies_its_query(self, client, carol, manager_task):
        client.force_login(carol)

        client.post(reverse("approvals:save_filter"), {"name": "Trains", "query": "q=train"})
        response = client.get(reverse("approvals:inbox"))

        assert '<a href="?q=train">Trains</a>' in response.text

    def test_the_user_picker_offers_matching_people_but_not_me(self, client, carol, people):
        client.force_login(carol)

        response = client.get(reverse("approvals:user_search"), {"to": "b"})

        assert '<option value="bob">' in response.text
        assert "carol" not in response.text

    @pytest.mark.parametrize(
        ("who", "offered"),
        [
            ("carol", ["alice", "bob"]),  # her reports, and finance, which she is in and manages
            ("bob", ["carol"]),  # finance and security, and his manager
            ("alice", ["carol"]),  # her manager; legal has nobody else
            ("eve", []),  # no group, no manager, no reports
            ("olga", ["alice", "bob", "carol", "eve"]),  # an operator: anyone
        ],
    )
    def test_the_user_picker_offers_only_people_one_may_hand_a_task_to(
        self, client, people, who, offered
    ):
        client.force_login(people[who])

        response = client.get(reverse("approvals:user_search"))

        assert re.findall(r'<option value="([^"]+)">', response.text) == offered

    def test_the_picker_and_the_rule_agree_for_every_pair(self, people, groups):
        GroupManager.objects.create(group=groups["security"], manager=people["eve"])

        for giver in people.values():
            offered = set(selectors.people_to_hand_to(giver=human_tasks.person_for(giver)))
            allowed = {
                person
                for person in people.values()
                if person != giver
                and permissions.may_hand_to(
                    human_tasks.person_for(giver), human_tasks.person_for(person)
                )
            }
            assert offered == allowed, giver.username


class TestOutOfOffice:
    def test_setting_a_substitute_sends_new_tasks_to_them(self, client, carol, start_expense):
        client.force_login(carol)
        today = timezone.localdate()

        client.post(
            reverse("approvals:away"),
            {
                "substitute": "bob",
                "starts_at": (today - timedelta(days=1)).isoformat(),
                "ends_at": (today + timedelta(days=2)).isoformat(),
            },
        )
        task = start_expense().human_tasks.get()

        assert (task.assignee.username, task.substitute_for.username) == ("bob", "carol")

    def test_a_bad_substitute_is_named(self, client, carol):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:away"),
            {
                "substitute": "nobody",
                "starts_at": "2026-12-01",
                "ends_at": "2026-12-05",
            },
        )

        assert response.status_code == 422
        assert "no active user called" in response.text


class TestQueriesPerPage:
    """Session, user, list, counts: the same four whatever the tab, filter, sort or size."""

    @pytest.mark.parametrize(
        "query",
        [
            {},
            {"tab": "queue"},
            {"tab": "delegated", "sort": "priority"},
            {"tab": "queue", "sort": "priority", "priority": "3", "sla": "on_time"},
            {"tab": "mine", "type": "expense", "q": "trip", "sla": "overdue"},
            {"cursor": "not-a-cursor"},
        ],
    )
    def test_a_page_costs_three_queries_the_list_three_and_the_counts_three_at_any_size(
        self,
        client,
        bob,
        alice,
        groups,
        make_task,
        django_assert_num_queries,
        django_assert_max_num_queries,
        query,
    ):
        client.force_login(bob)
        url = reverse("approvals:inbox")
        on_postgresql = connection.vendor == "postgresql"
        at_most = django_assert_num_queries if on_postgresql else django_assert_max_num_queries
        # Off PostgreSQL, separation of duties reads the viewer's decisions apart, and the
        # page's tasks and its counts are two queries.
        elsewhere = 0 if on_postgresql else 1
        sizes = []
        for size in (1, 40):
            while HumanTask.objects.filter(title="Trip").count() < size * 3:
                make_task(title="Trip", state="claimed", assignee=bob)
                make_task(title="Trip", state="delegated", assignee=alice, owner=bob)
                make_task(title="Trip", state="open", groups=[groups["finance"]], users=[bob])

            # Beyond the session and the user, one query: the page's tasks with their rows
            # and the counts, sent together.
            with at_most(3 + 2 * elsewhere):
                page = client.get(url, query)
            with at_most(3 + elsewhere):
                client.get(url, query, **htmx_target("task-list"))
            with django_assert_num_queries(3):
                client.get(url, query, **htmx_target("tab-counts"))
            sizes.append(len(page.context["page"].tasks))

        assert page.status_code == 200
        if set(query) <= {"tab", "sort"}:
            assert sizes == [1, 25]

    def test_a_group_manager_finds_their_groups_sla_dashboard_from_the_inbox(
        self, client, carol, bob
    ):
        client.force_login(carol)  # manages finance
        managers = client.get(reverse("approvals:inbox"))
        client.force_login(bob)
        others = client.get(reverse("approvals:inbox"))

        assert "Your groups' SLA dashboard" in managers.text
        assert "Your groups' SLA dashboard" not in others.text

    def test_tab_counts_stop_at_99_plus(self, client, bob, make_task):
        for _ in range(100):
            make_task(state="claimed", assignee=bob)
        client.force_login(bob)

        response = client.get(reverse("approvals:inbox"), **htmx_target("tab-counts"))

        assert 'aria-label="99+ tasks">99+</span>' in response.text
        assert 'aria-label="0 tasks">0</span>' in response.text


def cursor_of(*values) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


class TestCraftedText:
    """NUL and other control characters once reached PostgreSQL and answered 500."""

    def test_the_user_picker_refuses_a_control_character_saying_so(self, client, carol):
        client.force_login(carol)

        response = client.get(reverse("approvals:user_search"), {"to": "b\x00"})

        assert response.status_code == 400
        assert response.text == (
            "The name must not contain control characters (found U+0000 at position 2)."
        )

    @pytest.mark.parametrize(
        ("name", "query", "said"),
        [
            ("Tr\x00ins", "q=train", "The filter name must not contain control characters"),
            ("Trains", "q=tr\x00in", "The filter query must not contain control characters"),
            ("T" * 81, "q=train", "The filter name must be at most 80 characters (this has 81)"),
        ],
    )
    def test_a_saved_filter_that_cannot_be_kept_is_refused_and_nothing_saved(
        self, client, carol, name, query, said
    ):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:save_filter"), {"name": name, "query": query}, follow=True
        )

        assert said in response.text
        assert SavedFilter.objects.count() == 0

    def test_a_search_with_a_control_character_is_400_and_left_out(
        self, client, carol, manager_task
    ):
        client.force_login(carol)

        response = client.get(reverse("approvals:inbox"), {"q": "Lyon\x00"})

        assert response.status_code == 400
        assert "The search must not contain control characters" in response.text
        assert manager_task.title in response.text


class TestCraftedTimes:
    """Moments at the ends of the calendar once answered 500 (OverflowError or PostgreSQL)."""

    def test_a_cursor_out_of_range_starts_from_the_first_page_saying_so(
        self, client, carol, manager_task
    ):
        client.force_login(carol)
        cursor = cursor_of("0001-01-01T00:00:00+05:00", str(manager_task.pk))

        response = client.get(reverse("approvals:inbox"), {"cursor": cursor})

        assert response.status_code == 200
        assert "That page link no longer works, so here is the first page." in response.text
        assert manager_task.title in response.text

    @pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
    def test_an_away_date_out_of_range_is_422_saying_the_range(self, client, carol, bob, moment):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:away"),
            {"substitute": "bob", "starts_at": moment, "ends_at": "2026-12-05"},
        )

        assert response.status_code == 422
        assert "The start date must lie between 0001-01-02 and 9999-12-30" in response.text
        assert Substitution.objects.count() == 0

    def test_an_away_date_that_is_not_a_date_is_named(self, client, carol, bob):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:away"),
            {"substitute": "bob", "starts_at": "2026-12-01", "ends_at": "soon"},
        )

        assert response.status_code == 422
        assert "The end date must be an ISO 8601 date-time" in response.text


class TestTaskForm:
    def test_the_task_page_draws_the_approvals_form(self, client, bob, finance_task):
        client.force_login(bob)

        page = client.get(reverse("approvals:task", args=[finance_task.pk])).text

        assert "<legend>To approve, fill in</legend>" in page
        assert 'name="form-cost_centre"' in page
        assert "The cost centre to charge, e.g. FIN-1200" in page

    def test_an_empty_form_comes_back_with_the_error_beside_its_box_and_nothing_decided(
        self, client, bob, finance_task
    ):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:approve", args=[finance_task.pk]),
            {"version": finance_task.version, "comment": "Budget ok", "form-cost_centre": ""},
        )

        assert response.status_code == 422
        assert "Fill in the form to approve: Cost centre: This is required." in response.text
        assert '<p class="field-error" id="field-form-cost_centre-error">This is required.</p>' in (
            response.text
        )
        assert ">Budget ok</textarea>" in response.text  # the comment is kept too
        finance_task.refresh_from_db()
        assert (finance_task.state, finance_task.outcome) == (TaskState.OPEN, "")

    def test_a_wrong_value_is_refilled_and_explained_in_the_htmx_panel(
        self, client, bob, finance_task
    ):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:approve", args=[finance_task.pk]),
            {"version": finance_task.version, "form-cost_centre": "fin 12"},
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 422
        assert response.text.lstrip().startswith('<section id="decision-panel"')
        assert 'value="fin 12"' in response.text
        assert "Enter the cost centre to charge, e.g. FIN-1200." in response.text
        assert "HX-Trigger" not in response

    def test_valid_values_approve_and_the_panel_shows_them(self, client, bob, finance_task):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:approve", args=[finance_task.pk]),
            {"version": finance_task.version, "form-cost_centre": "FIN-1200"},
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 200
        assert "Approved." in response.text
        assert "<dt>Cost centre</dt>" in response.text
        assert "<dd>FIN-1200</dd>" in response.text
        assert "inbox-changed" in response["HX-Trigger"]
        finance_task.refresh_from_db()
        assert finance_task.form_values == {"cost_centre": "FIN-1200"}

    def test_the_audit_trail_shows_the_values(self, client, bob, finance_task):
        human_tasks.approve_human_task(
            task_id=finance_task.pk, user=bob, channel="inbox", values={"cost_centre": "FIN-1200"}
        )
        client.force_login(bob)

        page = client.get(reverse("approvals:task", args=[finance_task.pk])).text

        assert "<small>form: cost_centre = FIN-1200</small>" in page

    def test_a_stale_form_is_refused_as_stale_not_as_incomplete(
        self, client, bob, carol, finance_task
    ):
        client.force_login(bob)
        seen = finance_task.version
        human_tasks.claim_human_task(task_id=finance_task.pk, user=bob, channel="inbox")

        response = client.post(
            reverse("approvals:approve", args=[finance_task.pk]),
            {"version": seen, "form-cost_centre": ""},
            **htmx_target("decision-panel"),
        )

        assert response.status_code == 409
        assert "changed since you opened it" in response.text

    def test_rejecting_needs_no_form(self, client, bob, finance_task):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:reject", args=[finance_task.pk]),
            {"version": finance_task.version, "reason": "Not in this year's budget"},
        )

        assert response.status_code == 302
        finance_task.refresh_from_db()
        assert finance_task.outcome == "rejected"

    def test_the_inbox_row_sends_the_reviewer_to_the_form_instead_of_approving(
        self, client, bob, finance_task
    ):
        client.force_login(bob)

        response = client.get(reverse("approvals:inbox"), {"tab": "queue"})

        row = re.search(rf'<tr id="row-{finance_task.pk}">.*?</tr>', response.text, re.S).group(0)
        assert "Approve…" in row
        assert 'name="task"' not in row  # not offered for bulk approval
        assert reverse("approvals:approve", args=[finance_task.pk]) not in row

    def test_a_one_click_approval_from_a_row_is_refused_with_the_reason(
        self, client, bob, finance_task
    ):
        client.force_login(bob)

        response = client.post(
            reverse("approvals:approve", args=[finance_task.pk]),
            {"version": finance_task.version},
            **htmx_target(f"row-{finance_task.pk}"),
        )

        assert response.status_code == 422
        assert f'<tr id="row-{finance_task.pk}">' in response.text
        assert "Fill in the form to approve" in response.text
