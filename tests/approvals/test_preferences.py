"""Each person reads Baton in their own language and time zone: the preferences page and
API, the middleware that applies the choice, and what is written for someone else to
read (notifications, emails) in the reader's language."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone, translation

from approvals import human_tasks
from approvals.models import Notification, Preferences
from approvals.preferences import SESSION_LANGUAGE, SESSION_TIME_ZONE
from approvals.states import NoticeKind
from tests.api.conftest import ApiClient
from workflows import starting
from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db

PREFERENCES = "/preferences/"


@pytest.fixture
def alices_task(people, start, drive):
    """carol's approval of an expense alice started herself (so she hears its outcome)."""
    run = start(
        "expense",
        {"requester": "alice", "title": "Train to Lyon", "amount": "120.00", "currency": "EUR"},
        started_by=people["alice"],
    )
    return drive(run).human_tasks.get(node="manager_approval")


@pytest.fixture
def german(alice):
    """alice reads Baton in German, in Berlin's time."""
    Preferences.objects.create(user=alice, language="de", time_zone="Europe/Berlin")
    return alice


class TestThePreferencesPage:
    def test_saving_german_and_berlin_stores_them_and_the_next_page_speaks_german(
        self, client, alice
    ):
        client.force_login(alice)

        response = client.post(
            PREFERENCES, {"language": "de", "time_zone": "Europe/Berlin"}, follow=True
        )

        assert response.status_code == 200
        assert Preferences.objects.filter(
            user=alice, language="de", time_zone="Europe/Berlin"
        ).exists()
        assert (client.session[SESSION_LANGUAGE], client.session[SESSION_TIME_ZONE]) == (
            "de",
            "Europe/Berlin",
        )
        page = response.content.decode()
        assert '<html lang="de">' in page
        assert "<h1>Sprache und Zeitzone</h1>" in page
        assert "Ihre Sprache und Zeitzone sind gespeichert." in page
        assert response.headers["Content-Language"] == "de"

    def test_an_unknown_time_zone_is_refused_with_422_and_nothing_is_stored(self, client, alice):
        client.force_login(alice)

        response = client.post(PREFERENCES, {"language": "de", "time_zone": "Mars/Olympus"})

        assert response.status_code == 422
        assert "“Mars/Olympus” is not a time zone: choose one such as Europe/Berlin." in (
            response.content.decode()
        )
        assert not Preferences.objects.exists()

    def test_a_language_baton_does_not_speak_is_refused_by_name(self, client, alice):
        client.force_login(alice)

        response = client.post(PREFERENCES, {"language": "fr", "time_zone": ""})

        assert response.status_code == 422
        assert "Baton speaks en, de, not “fr”." in response.content.decode()

    def test_the_choice_follows_the_person_to_their_next_sign_in(self, client, german):
        client.force_login(german)

        page = client.get("/").content.decode()

        assert "<h1>Posteingang</h1>" in page
        assert "Neuer Antrag" in page

    def test_without_a_choice_the_page_follows_the_browser_and_english_is_the_default(
        self, client, alice
    ):
        client.force_login(alice)

        english = client.get("/").content.decode()
        german = client.get("/", headers={"Accept-Language": "de-DE,de;q=0.9"}).content.decode()

        assert "<h1>Inbox</h1>" in english
        assert "<h1>Posteingang</h1>" in german

    def test_the_language_and_zone_do_not_outlive_the_request(self, client, german):
        client.force_login(german)

        client.get("/")

        assert translation.get_language() == "en"
        assert timezone.get_current_timezone_name() == "UTC"

    def test_the_chosen_language_wins_over_the_browsers(self, client, german):
        client.force_login(german)

        page = client.get("/", headers={"Accept-Language": "en-US"}).content.decode()

        assert "<h1>Posteingang</h1>" in page


class TestCost:
    def test_a_chosen_language_costs_a_page_no_query(self, client, carol, manager_task):
        def queries_of_the_inbox() -> int:
            client.force_login(carol)  # a sign-in copies the choice into the session
            client.get("/")  # warm: the first page of a session loads what it caches
            with CaptureQueriesContext(connection) as queries:
                page = client.get("/")
            assert page.status_code == 200
            return len(queries)

        english = queries_of_the_inbox()
        Preferences.objects.create(user=carol, language="de", time_zone="Europe/Berlin")
        german = queries_of_the_inbox()

        assert german == english


class TestDatesAndTimeZones:
    def test_a_due_time_shows_in_the_readers_zone_and_format(self, client, carol, manager_task):
        manager_task.due_at = datetime(2026, 12, 24, 15, 30, tzinfo=UTC)
        manager_task.save()
        Preferences.objects.create(user=carol, language="de", time_zone="Europe/Berlin")
        client.force_login(carol)

        page = client.get(reverse("approvals:task", args=[manager_task.pk])).content.decode()

        assert "24.12.2026 16:30 CET" in page
        assert "Fällig" in page
        assert "Einreichen abgeschlossen" in " ".join(page.split())  # the timeline's words

    def test_english_keeps_its_own_format_in_the_sites_zone(self, client, carol, manager_task):
        manager_task.due_at = datetime(2026, 12, 24, 15, 30, tzinfo=UTC)
        manager_task.save()
        client.force_login(carol)

        page = client.get(reverse("approvals:task", args=[manager_task.pk])).content.decode()

        assert "2026-12-24 15:30 UTC" in page


class TestNumbers:
    def test_an_amount_is_written_as_money_in_the_readers_locale(self, client, german, alices_task):
        client.force_login(german)

        page = client.get(f"/requests/{alices_task.run_id}/").content.decode()

        assert "<dd>120,00 €</dd>" in page

    def test_english_puts_the_currency_symbol_first(self, client, alice, alices_task):
        client.force_login(alice)

        page = client.get(f"/requests/{alices_task.run_id}/").content.decode()

        assert "<dd>€120.00</dd>" in page


class TestStepsInWords:
    def test_a_german_reader_sees_the_steps_labels_where_it_stands_the_timeline_and_picture(
        self, client, german, alices_task
    ):
        client.force_login(german)

        page = client.get(f"/requests/{alices_task.run_id}/").content.decode()

        approval = "Genehmigung durch die Führungskraft"
        assert f"<strong>{approval}</strong>: wartet auf eine Entscheidung durch Carol" in page
        assert "Einreichen abgeschlossen" in page
        assert f"<title>{approval} (Genehmigung): wartend</title>" in page
        assert ">manager_approval<" not in page
        assert "manager approval" not in page

    def test_the_task_page_names_its_step_and_type_in_the_readers_language(
        self, client, carol, alices_task
    ):
        Preferences.objects.create(user=carol, language="de")
        client.force_login(carol)

        page = client.get(reverse("approvals:task", args=[alices_task.pk])).content.decode()

        assert "Genehmigung durch die Führungskraft in einem Workflow „Ausgabe“ (v1)" in page
        assert "Einreichen abgeschlossen" in page
        # The run's data as its request page shows it: German labels, money as money.
        assert "<dt>Betrag</dt>\n    <dd>120,00 €</dd>" in page


class TestTypesInWords:
    def test_the_inbox_filters_and_decided_list_name_types_by_their_german_titles(
        self, client, carol, alices_task
    ):
        human_tasks.approve_human_task(task_id=alices_task.pk, user=carol, channel="inbox")
        Preferences.objects.create(user=carol, language="de")
        client.force_login(carol)

        inbox = client.get(reverse("approvals:inbox")).content.decode()
        decided = client.get(reverse("approvals:inbox"), {"tab": "decided"}).content.decode()

        assert '<option value="expense" >Ausgabe</option>' in inbox
        assert '<option value="vendor_onboarding" >Lieferanten-Onboarding</option>' in inbox
        assert "<td>Ausgabe</td>" in decided

    def test_an_inbox_row_names_its_type_by_the_german_title(self, client, carol, alices_task):
        Preferences.objects.create(user=carol, language="de")
        client.force_login(carol)

        inbox = client.get(reverse("approvals:inbox")).content.decode()

        assert f'<tr id="row-{alices_task.pk}">' in inbox
        assert "<td>Ausgabe</td>" in inbox
        assert "<td>expense</td>" not in inbox

    def test_the_console_lists_runs_and_tasks_by_the_types_german_title(
        self, client, operator, alices_task
    ):
        operator.is_staff = True
        operator.save()
        Preferences.objects.create(user=operator, language="de")
        client.force_login(operator)

        runs = client.get("/console/").content.decode()
        tasks = client.get("/console/tasks/").content.decode()
        run = client.get(f"/console/runs/{alices_task.run_id}/").content.decode()
        sla = client.get("/console/sla/").content.decode()

        assert "<td>Ausgabe v1</td>" in runs
        assert '<option value="expense">Ausgabe</option>' in runs
        assert ">Ausgabe</td>" in tasks
        assert "<h1>Ausgabe v1" in run
        assert '<th scope="col">Workflow-Typ</th>' in sla
        assert '<td data-label="Workflow-Typ">Ausgabe</td>' in sla

    def test_a_type_no_longer_registered_is_its_name_with_spaces(self):
        assert starting.kind_named("retired_type") == "retired type"

    def test_a_version_no_longer_registered_takes_the_latest_versions_title(self):
        with translation.override("de"):
            assert starting.kind_named("expense", 99) == "Ausgabe"


class TestTheApi:
    def test_a_person_sets_and_reads_their_choice(self, alice):
        _, secret = issue_token(user=alice)
        api = ApiClient(secret)

        put = api.put("/me/preferences", {"language": "de", "time_zone": "Europe/Berlin"})
        got = api.get("/me/preferences")

        assert put.status_code == 200
        assert got.json() == {"language": "de", "time_zone": "Europe/Berlin"}

    def test_an_unknown_language_is_a_422_problem(self, alice):
        _, secret = issue_token(user=alice)

        response = ApiClient(secret).put("/me/preferences", {"language": "xx", "time_zone": ""})

        assert response.status_code == 422
        assert response.json()["detail"] == "Baton speaks en, de, not “xx”."

    def test_problems_speak_the_stored_language_unless_the_caller_asks_another(self, german):
        _, secret = issue_token(user=german)
        api = ApiClient(secret)
        missing = "/tasks/00000000-0000-0000-0000-000000000000"

        in_german = api.get(missing)
        in_english = api.client.get(
            f"/api/v1{missing}", headers={**api.headers, "Accept-Language": "en"}
        )

        assert in_german.status_code == in_english.status_code == 404
        assert in_german.json()["title"] == "Nicht gefunden"
        assert in_german.json()["detail"] == (
            "Nicht gefunden: diese Aufgabe (oder nicht für Sie sichtbar)."
        )
        assert in_english.json()["title"] == "Not found"

    def test_pydantics_field_errors_are_said_in_german_with_their_type(self, german):
        _, secret = issue_token(user=german)
        body = {"type": "order", "input": {"amount": "0", "currency": "EUR", "x": 1}}

        response = ApiClient(secret).post("/workflows", body)

        assert response.status_code == 422
        errors = {error["field"]: error for error in response.json()["errors"]}
        assert errors["order_id"] == {
            "field": "order_id",
            "message": "Feld erforderlich",
            "type": "missing",
        }
        assert errors["amount"]["message"] == "muss größer als null sein"
        assert errors["x"]["type"] == "extra_forbidden"
        assert errors["x"]["message"] == "Zusätzliche Eingaben sind nicht erlaubt"

    def test_a_task_forms_schema_is_labelled_in_the_readers_language(self, finance_task, bob):
        # bob is in finance: he reads the task, and its form's schema, in German.
        Preferences.objects.create(user=bob, language="de")
        _, secret = issue_token(user=bob)

        task = ApiClient(secret).get(f"/tasks/{finance_task.pk}").json()

        cost_centre = task["form_schema"]["properties"]["cost_centre"]
        assert cost_centre["title"] == "Kostenstelle"
        assert cost_centre["description"] == "die zu belastende Kostenstelle, z. B. FIN-1200"

    def test_a_refusal_from_a_use_case_is_translated(self, carol, manager_task):
        Preferences.objects.create(user=carol, language="de")
        _, secret = issue_token(user=carol)

        response = ApiClient(secret).post(
            f"/tasks/{manager_task.pk}/decision", {"outcome": "reject", "comment": ""}
        )

        assert response.status_code == 422
        assert response.json()["title"] == "Ungültige Anfrage"
        assert response.json()["detail"] == "Sagen Sie, warum Sie ablehnen: ein Grund ist nötig."


class TestWrittenForTheReader:
    def test_a_decision_is_told_to_a_german_requester_in_german(self, german, carol, alices_task):
        human_tasks.approve_human_task(task_id=alices_task.pk, user=carol, channel="inbox")

        notice = Notification.objects.get(user=german, kind=NoticeKind.REQUEST_DECIDED)

        assert notice.text == f"Carol hat „{alices_task.title}“ genehmigt"

    def test_a_decisions_comment_follows_it_in_the_readers_words(self, german, carol, alices_task):
        human_tasks.approve_human_task(
            task_id=alices_task.pk, user=carol, channel="inbox", comment="Passt."
        )

        notice = Notification.objects.get(user=german, kind=NoticeKind.REQUEST_DECIDED)

        assert notice.text == f"Carol hat „{alices_task.title}“ genehmigt: Passt."

    def test_an_english_requester_is_told_in_english(self, alice, carol, alices_task):
        human_tasks.approve_human_task(task_id=alices_task.pk, user=carol, channel="inbox")

        notice = Notification.objects.get(user=alice, kind=NoticeKind.REQUEST_DECIDED)

        assert notice.text == f"Carol approved “{alices_task.title}”"

    def test_the_email_of_a_new_task_is_written_in_its_readers_language(
        self, carol, start_expense, django_capture_on_commit_callbacks
    ):
        Preferences.objects.create(user=carol, language="de", time_zone="Europe/Berlin")

        with django_capture_on_commit_callbacks(execute=True):
            start_expense()

        (message,) = [message for message in mail.outbox if message.to == ["carol@example.com"]]
        assert message.subject == (
            "[Baton] Neue Aufgabe für Sie: Expense: Train to Lyon — €120.00 (alice)"
        )
        assert message.body.startswith("Hallo Carol,")

    def test_a_due_reminder_names_the_time_in_the_readers_zone(
        self, carol, manager_task, django_capture_on_commit_callbacks
    ):
        from approvals.notify import notifications

        Preferences.objects.create(user=carol, language="de", time_zone="Europe/Berlin")
        manager_task.due_at = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
        manager_task.save()

        notifications.task_due_soon(
            task=manager_task, requesters=["alice"], now=manager_task.due_at - timedelta(hours=2)
        )

        notice = Notification.objects.get(user=carol, kind=NoticeKind.TASK_DUE_SOON)
        assert notice.text == f"Fällig 01.07.2026 10:00 CEST: {manager_task.title}"
