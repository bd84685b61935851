"""Operators in the admin: they see runs and act on them only through the engine."""

from __future__ import annotations

import re
from datetime import date

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse
from django.utils import timezone

from tests.workflows.test_engine import sweep_until_quiet
from workflows import engine
from workflows.models import ActivityLimiter, BusinessCalendar
from workflows.states import RunState

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client) -> User:
    group = Group.objects.create(name="operators")
    group.permissions.set(
        Permission.objects.filter(codename__in=["view_workflowrun", "operate_workflowrun"])
    )
    user = User.objects.create_user("olga", password="pw", is_staff=True)
    user.groups.add(group)
    return user


@pytest.fixture
def viewer() -> User:
    user = User.objects.create_user("vic", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    return user


@pytest.fixture
def dead_letter(start, drive, order_input):
    failing = order_input(simulate={"shipping": "fail", "refund": "outage"})
    return sweep_until_quiet(drive(start("order", failing)), drive)


class TestRunAdmin:
    def test_an_operator_sees_runs_and_their_timeline(self, client, operator, dead_letter):
        client.force_login(operator)

        listing = client.get(reverse("admin:workflows_workflowrun_changelist"))
        detail = client.get(reverse("admin:workflows_workflowrun_change", args=[dead_letter.pk]))

        assert listing.status_code == 200
        assert str(dead_letter.pk) in listing.text
        assert detail.status_code == 200
        assert "charge_payment" in detail.text

    def test_an_operator_retries_a_dead_letter(self, client, operator, dead_letter):
        client.force_login(operator)

        response = client.post(
            reverse("admin:workflows_workflowrun_changelist"),
            {"action": "retry_dead_letter", "_selected_action": [dead_letter.pk]},
            follow=True,
        )

        dead_letter.refresh_from_db()
        assert dead_letter.state == RunState.COMPENSATING
        entry = LogEntry.objects.get_for_object(dead_letter).get()
        assert (entry.actor, entry.additional_data["event"], entry.additional_data["channel"]) == (
            operator,
            "run_retried",
            "admin",
        )
        assert "retrying its failed compensation" in response.text

    def test_a_refused_action_says_why(self, client, operator, start, order_input):
        run = start("order", order_input())
        client.force_login(operator)

        response = client.post(
            reverse("admin:workflows_workflowrun_changelist"),
            {"action": "retry_dead_letter", "_selected_action": [run.pk]},
            follow=True,
        )

        assert "Only a dead-lettered run can be retried" in response.text

    def test_a_viewer_without_the_operate_permission_gets_no_actions(
        self, client, viewer, dead_letter
    ):
        client.force_login(viewer)

        response = client.get(reverse("admin:workflows_workflowrun_changelist"))

        assert response.status_code == 200
        assert "retry_dead_letter" not in response.text


def calendar_form(**overrides) -> dict[str, str]:
    """The calendar change form as a browser posts it, with one holiday row."""
    data = {
        "name": "berlin",
        "description": "",
        "time_zone": "Europe/Berlin",
        "monday": "09:00-17:00",
        "tuesday": "09:00-17:00",
        "wednesday": "09:00-17:00",
        "thursday": "09:00-17:00",
        "friday": "09:00-13:00",
        "saturday": "",
        "sunday": "",
        "holidays-TOTAL_FORMS": "1",
        "holidays-INITIAL_FORMS": "0",
        "holidays-MIN_NUM_FORMS": "0",
        "holidays-MAX_NUM_FORMS": "1000",
        "holidays-0-date": "2026-10-03",
        "holidays-0-name": "Day of German Unity",
    }
    return data | overrides


class TestBusinessCalendarAdmin:
    def test_the_standard_calendar_is_listed_with_its_working_week(self, admin_client):
        response = admin_client.get(reverse("admin:workflows_businesscalendar_changelist"))

        assert response.status_code == 200
        assert "standard" in response.text
        assert "Mon 09:00-17:00" in response.text
        assert "Sat" not in response.text.split("standard", 1)[1].split("</tr>", 1)[0]

    def test_an_operator_adds_a_calendar_with_a_holiday(self, admin_client):
        response = admin_client.post(
            reverse("admin:workflows_businesscalendar_add"), calendar_form()
        )

        assert response.status_code == 302
        calendar = BusinessCalendar.objects.get(name="berlin").as_calendar()
        assert calendar.time_zone == "Europe/Berlin"
        assert calendar.hours[4] == ((540, 780),)
        assert calendar.hours[5] == ()
        assert calendar.holidays == {date(2026, 10, 3)}

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("monday", "9-5", "is not an interval like 09:00-17:00"),
            ("tuesday", "17:00-09:00", "ends before it starts"),
            ("time_zone", "Europe/Atlantis", "unknown time zone"),
        ],
    )
    def test_bad_hours_or_zones_are_refused_saying_why_and_nothing_is_saved(
        self, admin_client, field, value, message
    ):
        response = admin_client.post(
            reverse("admin:workflows_businesscalendar_add"), calendar_form(**{field: value})
        )

        assert response.status_code == 200
        assert message in response.text
        assert not BusinessCalendar.objects.filter(name="berlin").exists()

    def test_a_calendar_without_a_working_day_is_refused(self, admin_client):
        week = dict.fromkeys(("monday", "tuesday", "wednesday", "thursday", "friday"), "")

        response = admin_client.post(
            reverse("admin:workflows_businesscalendar_add"), calendar_form(**week)
        )

        assert response.status_code == 200
        assert "needs working hours on at least one weekday" in response.text
        assert not BusinessCalendar.objects.filter(name="berlin").exists()

    def test_a_calendar_a_definition_counts_on_can_be_neither_deleted_nor_renamed(
        self, admin_client
    ):
        standard = BusinessCalendar.objects.get(name="standard")

        delete = admin_client.post(
            reverse("admin:workflows_businesscalendar_delete", args=[standard.pk]), {"post": "yes"}
        )
        page = admin_client.get(
            reverse("admin:workflows_businesscalendar_change", args=[standard.pk])
        )

        assert delete.status_code == 403
        assert BusinessCalendar.objects.filter(name="standard").exists()
        assert "expense v1" in page.text
        assert "(so it cannot be renamed or deleted)" in page.text
        assert 'name="name"' not in page.text

    def test_a_calendar_nothing_uses_may_be_deleted(self, admin_client):
        unused = BusinessCalendar.objects.create(name="unused")

        response = admin_client.post(
            reverse("admin:workflows_businesscalendar_delete", args=[unused.pk]), {"post": "yes"}
        )

        assert response.status_code == 302
        assert not BusinessCalendar.objects.filter(name="unused").exists()


class TestAdminIndex:
    def test_counts_the_runs_that_need_an_operator_with_links(
        self, client, operator, dead_letter, start
    ):
        engine.pause_run(run_id=start("test_linear", {}).pk)
        client.force_login(operator)

        response = client.get(reverse("admin:index"))

        counts = response.text.split('id="runs-needing-an-operator"')[1].split("</table>")[0]
        assert re.search(r"Dead letters</a></th>\s*<td>1</td>", counts)
        assert re.search(r"Failed runs</a></th>\s*<td>0</td>", counts)
        assert re.search(r"Paused runs</a></th>\s*<td>1</td>", counts)
        assert "/console/?state=dead_lettered" in counts

    def test_staff_who_may_not_view_runs_see_no_counts(self, client, dead_letter):
        client.force_login(User.objects.create_user("stan", password="pw", is_staff=True))

        response = client.get(reverse("admin:index"))

        assert response.status_code == 200
        assert "runs-needing-an-operator" not in response.text


class TestActivityLimiterAdmin:
    def test_lists_each_limited_activitys_slots_and_window_read_only(self, admin_client):
        ActivityLimiter.objects.create(
            key="payouts:pay_each", holders=[1, 2, 3], window_count=7, window_start=timezone.now()
        )

        listed = admin_client.get(reverse("admin:workflows_activitylimiter_changelist"))
        row = listed.text.split("payouts:pay_each", 1)[1].split("</tr>", 1)[0]
        change = admin_client.get(
            reverse("admin:workflows_activitylimiter_change", args=["payouts:pay_each"])
        )

        assert '<td class="field-slots_held">3</td>' in row
        assert '<td class="field-window_count">7</td>' in row
        assert "Add activity limiter" not in listed.text
        assert 'name="_save"' not in change.text
        assert "Delete" not in change.text
