"""The operators' run console as olga (staff operator), vic (staff who may only view
runs) and eve (an outsider) see it: who gets in, filters, pages, a run's page, actions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.workflows.test_engine import sweep_until_quiet
from workflows.models import Signal, WorkflowRun
from workflows.states import RunState, StepState

pytestmark = pytest.mark.django_db


@pytest.fixture
def console_operator(operator) -> User:
    operator.is_staff = True
    operator.save()
    return User.objects.get(pk=operator.pk)


@pytest.fixture
def viewer(people) -> User:
    user = User.objects.create_user("vic", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    return user


@pytest.fixture
def as_user():
    def signed_in(user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return signed_in


@pytest.fixture
def olga_client(as_user, console_operator) -> Client:
    return as_user(console_operator)


@pytest.fixture
def dead_letter(start, drive, order_input) -> WorkflowRun:
    failing = order_input(order_id="B-2002", simulate={"shipping": "fail", "refund": "outage"})
    return sweep_until_quiet(drive(start("order", failing)), drive)


def run_url(run: WorkflowRun, tail: str = "") -> str:
    return f"/console/runs/{run.pk}/{tail}"


class TestWhoGetsIn:
    def test_someone_signed_out_is_sent_to_sign_in(self, client, dead_letter):
        response = client.get("/console/")

        assert response.status_code == 302
        assert response.url.startswith("/accounts/login/")

    @pytest.mark.parametrize("path", ["", "runs/{run}/", "runs/{run}/retry/"])
    def test_an_outsider_is_refused_saying_it_is_for_operators(
        self, as_user, eve, dead_letter, path
    ):
        response = as_user(eve).get("/console/" + path.format(run=dead_letter.pk))

        assert response.status_code == 403
        assert "The run console is for operators (staff) only." in response.text

    def test_an_outsiders_action_is_refused_and_changes_nothing(self, as_user, eve, dead_letter):
        response = as_user(eve).post(run_url(dead_letter, "retry/"))

        assert response.status_code == 403
        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.DEAD_LETTERED

    def test_staff_who_may_only_view_see_runs_but_are_refused_actions(
        self, as_user, viewer, dead_letter
    ):
        client = as_user(viewer)

        page = client.get(run_url(dead_letter))
        asked = client.get(run_url(dead_letter, "retry/"))
        posted = client.post(run_url(dead_letter, "retry/"))

        assert page.status_code == 200
        assert "You may look, not act" in page.text
        assert "Retry the failed undo…" not in page.text
        assert asked.status_code == posted.status_code == 403
        assert "Only operators may retry a dead-lettered run" in posted.text
        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.DEAD_LETTERED

    def test_the_nav_shows_runs_to_staff_only(self, as_user, viewer, alice):
        assert 'href="/console/"' in as_user(viewer).get("/").text
        assert 'href="/console/"' not in as_user(alice).get("/").text


class TestRunsList:
    def test_filters_by_state_and_shows_the_business_key(
        self, olga_client, dead_letter, start, order_input
    ):
        other = start("order", order_input(order_id="C-3003"))

        response = olga_client.get("/console/", {"state": "dead_lettered"})

        assert response.status_code == 200
        assert str(dead_letter.pk) in response.text
        assert "B-2002" in response.text
        assert str(other.pk) not in response.text

    def test_says_where_a_run_waits_in_peoples_words(self, olga_client, manager_task):
        response = olga_client.get("/console/")

        assert "Manager approval: waiting for a decision by Carol" in response.text
        assert "waiting (signal, timer or join)" not in response.text

    @pytest.mark.parametrize(
        ("query", "found"),
        [
            ({"q": "B-2002"}, {"b"}),
            # The customer's email is personal, sealed at rest: no search matches it.
            ({"q": "ada@example.com"}, set()),
            ({"type": "order", "version": "1"}, {"b", "c"}),
            ({"type": "test_linear"}, {"linear"}),
            ({"version": "2"}, set()),
            ({"requester": "alice"}, {"c"}),
            ({"correlation_id": "shop-9"}, {"linear"}),
            ({"q": "nothing-like-it"}, set()),
        ],
    )
    def test_each_filter_finds_what_it_names(
        self, olga_client, start, order_input, alice, query, found
    ):
        runs = {
            "b": start("order", order_input(order_id="B-2002")),
            "c": start("order", order_input(order_id="C-3003"), started_by=alice),
            "linear": start("test_linear", {}, correlation_id="shop-9"),
        }

        response = olga_client.get("/console/", query)

        shown = {name for name, run in runs.items() if str(run.pk) in response.text}
        assert shown == found

    def test_a_run_id_finds_its_run(self, olga_client, start, order_input):
        run = start("order", order_input())

        response = olga_client.get("/console/", {"q": str(run.pk)})

        assert response.text.count('href="/console/runs/') == 1

    def test_started_between_takes_whole_days(self, olga_client, start, order_input):
        run = start("order", order_input())
        today = timezone.now().date()

        inside = olga_client.get("/console/", {"from": today, "to": today})
        before = olga_client.get("/console/", {"to": today - timedelta(days=1)})

        assert str(run.pk) in inside.text
        assert str(run.pk) not in before.text

    def test_a_filter_it_cannot_read_is_left_out_saying_why(self, olga_client, start, order_input):
        run = start("order", order_input())

        response = olga_client.get(
            "/console/", {"from": "yesterday", "version": "one", "state": "lost", "q": "a\x00b"}
        )

        assert response.status_code == 200
        assert "Started from must be a date such as 2026-12-01; left out." in response.text
        assert "A version is a whole number" in response.text
        assert "There is no run state" in response.text
        assert "A search must not contain control characters" in response.text
        assert str(run.pk) in response.text

    def test_htmx_gets_the_list_alone(self, olga_client, dead_letter):
        response = olga_client.get(
            "/console/",
            {"state": "dead_lettered"},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="run-list",
        )

        assert response.text.lstrip().startswith('<section id="run-list"')
        assert str(dead_letter.pk) in response.text


class TestKeysetPages:
    def make_runs(self, count: int) -> list[WorkflowRun]:
        base = timezone.now() - timedelta(hours=1)
        runs = WorkflowRun.objects.bulk_create(
            WorkflowRun(
                workflow_type="test_linear",
                workflow_version=1,
                input={},
                state=RunState.RUNNING,
            )
            for _ in range(count)
        )
        for index, run in enumerate(runs):
            WorkflowRun.objects.filter(pk=run.pk).update(
                created_at=base + timedelta(seconds=index // 2)  # ties, broken by id
            )
        return runs

    def test_pages_follow_each_other_without_gaps_or_repeats(self, olga_client):
        runs = self.make_runs(30)

        first = olga_client.get("/console/")
        cursor = first.text.split("cursor=")[1].split('"')[0]
        second = olga_client.get("/console/", {"cursor": cursor})

        shown = [
            {str(run.pk) for run in runs if str(run.pk) in page.text} for page in (first, second)
        ]
        assert [len(ids) for ids in shown] == [25, 5]
        assert shown[0] | shown[1] == {str(run.pk) for run in runs}
        assert 'rel="next"' not in second.text

    def test_the_number_of_queries_does_not_grow_with_the_page(
        self, olga_client, start, drive, console_operator
    ):
        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                response = olga_client.get("/console/")
            assert response.status_code == 200
            return len(captured)

        for _ in range(2):
            drive(start("test_linear", {}))
        start("test_linear", {})
        few = queries()
        for _ in range(20):
            start("test_linear", {})
        for _ in range(5):
            drive(start("test_linear", {}))

        assert queries() == few


class TestRunPage:
    def test_shows_the_picture_steps_errors_timeline_and_the_fitting_actions(
        self, olga_client, dead_letter
    ):
        Signal.objects.create(
            run=dead_letter, name="nudge", signal_id="n-1", payload={}, received_at=timezone.now()
        )

        response = olga_client.get(run_url(dead_letter))

        text = response.text
        assert response.status_code == 200
        assert "<svg" in text
        assert "ServiceUnavailable" in text
        assert "undo <strong>Charge the payment</strong> <code>charge_payment</code>" in text
        assert "Timeline" in text
        assert "nudge" in text
        assert "Retry the failed undo…" in text
        assert "Resume past the failed undo…" in text
        assert "Pause…" not in text

    def test_a_failed_attempt_shows_its_traceback_and_the_worker_it_ran_on(
        self, olga_client, dead_letter
    ):
        failed = dead_letter.steps.exclude(last_traceback="").first()

        response = olga_client.get(run_url(dead_letter))

        assert "Traceback (most recent call last):" in response.text
        assert f"on <code>{failed.lease_holder}</code>" in response.text

    def test_the_query_count_does_not_grow_with_the_run(
        self, olga_client, start, drive, dead_letter
    ):
        short = drive(start("test_linear", {}))

        def queries(run: WorkflowRun) -> int:
            with CaptureQueriesContext(connection) as captured:
                olga_client.get(run_url(run))
            return len(captured)

        queries(short)  # the first page a process draws also fills its caches
        assert queries(dead_letter) == queries(short)

    def test_an_unknown_run_is_not_found(self, olga_client):
        response = olga_client.get("/console/runs/00000000-0000-0000-0000-000000000000/")

        assert response.status_code == 404


class TestActions:
    def test_asking_shows_a_confirmation_and_posting_retries_with_an_audit_entry(
        self, olga_client, dead_letter, console_operator
    ):
        asked = olga_client.get(
            run_url(dead_letter, "retry/"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="action-panel"
        )
        posted = olga_client.post(run_url(dead_letter, "retry/"), {"reason": "refunds are back"})

        assert asked.text.lstrip().startswith('<section id="action-panel"')
        assert "Retry the failed undo?" in asked.text
        assert posted.status_code == 302
        assert posted.url == run_url(dead_letter)
        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.COMPENSATING
        entry = LogEntry.objects.get_for_object(dead_letter).get()
        assert (entry.actor, entry.additional_data["comment"]) == (
            console_operator,
            "refunds are back",
        )
        followed = olga_client.get(posted.url)
        assert "Retrying its failed compensation." in followed.text
        assert "run_retried by olga via console" in followed.text

    def test_an_action_that_does_not_fit_the_state_is_refused_saying_why(
        self, olga_client, dead_letter
    ):
        response = olga_client.post(run_url(dead_letter, "pause/"))

        assert response.status_code == 409
        assert "Only a running or waiting run can be paused; this one is dead_lettered." in (
            response.text
        )

    def test_asking_for_an_action_that_does_not_fit_says_so_before_any_confirmation(
        self, olga_client, dead_letter
    ):
        response = olga_client.get(run_url(dead_letter, "pause/"))

        assert response.status_code == 409
        assert "Pause does not fit a run that is dead lettered." in response.text
        assert "Yes, pause" not in response.text

    def test_an_unknown_action_is_not_found(self, olga_client, dead_letter):
        assert olga_client.post(run_url(dead_letter, "explode/")).status_code == 404

    def test_skipping_with_bad_json_keeps_what_was_typed(self, olga_client, start, drive):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))

        response = olga_client.post(run_url(run, "steps/second/skip/"), {"result": "{oops"})

        assert response.status_code == 422
        assert "The result is not JSON" in response.text
        assert "{oops</textarea>" in response.text
        assert run.steps.get(node="second").state == StepState.RETRY_WAIT

    def test_skipping_a_stuck_step_goes_on_from_it(self, olga_client, start, drive):
        run = drive(start("test_linear", {"simulate": {"second": "fail"}}))
        offered = olga_client.get(run_url(run))

        response = olga_client.post(run_url(run, "steps/second/skip/"), {"result": '{"ok": 1}'})

        assert "Skip second with a result…" in offered.text
        assert response.status_code == 302
        run = drive(run)
        assert run.state == RunState.SUCCEEDED
        assert run.results["second"] == {"ok": 1}


class TestBulkRetry:
    def test_dead_letters_ticked_on_the_list_are_retried(self, olga_client, dead_letter):
        listing = olga_client.get("/console/", {"state": "dead_lettered"})
        swapped = olga_client.get(
            "/console/",
            {"state": "dead_lettered"},
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="run-list",
        )

        response = olga_client.post(
            "/console/retry-dead-letters/",
            {"run": [str(dead_letter.pk)], "next": "/console/?state=dead_lettered"},
        )

        assert f'name="run" value="{dead_letter.pk}"' in listing.text
        assert '<form id="bulk"' in swapped.text  # the checkboxes' form comes with them
        assert response.status_code == 302
        assert response.url == "/console/?state=dead_lettered"
        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.COMPENSATING
        assert "Retrying 1 dead letter." in olga_client.get(response.url).text

    def test_a_viewer_gets_no_checkboxes_and_is_refused(self, as_user, viewer, dead_letter):
        client = as_user(viewer)

        listing = client.get("/console/", {"state": "dead_lettered"})
        response = client.post("/console/retry-dead-letters/", {"run": [str(dead_letter.pk)]})

        assert 'name="run"' not in listing.text
        assert response.status_code == 403
        assert "Only operators may retry a dead-lettered run" in response.text

    def test_a_next_address_off_this_site_is_not_followed(self, olga_client, dead_letter):
        response = olga_client.post(
            "/console/retry-dead-letters/",
            {"run": [str(dead_letter.pk)], "next": "https://evil.example/"},
        )

        assert response.url == "/console/"

    def test_something_that_is_not_a_run_id_is_refused(self, olga_client):
        response = olga_client.post("/console/retry-dead-letters/", {"run": ["nope"]})

        assert response.status_code == 422
        assert "&#x27;nope&#x27; is not a run id." in response.text
