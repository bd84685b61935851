"""People hear, in the app and by email, when a task waits for them and how their request went."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from approvals import human_tasks
from approvals.models import Notification, NotificationSettings
from approvals.notify import notifications
from approvals.states import Channel, EmailMode, NoticeKind

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices_expense(people, start, drive):
    """alice's 120 EUR expense, started by her, waiting for carol (her manager)."""

    def make(amount: str = "120.00"):
        run = start(
            "expense",
            {"requester": "alice", "title": "Train to Lyon", "amount": amount, "currency": "EUR"},
            started_by=people["alice"],
        )
        return drive(run)

    return make


def told(user, kind=None):
    found = Notification.objects.filter(user=user)
    if kind:
        found = found.filter(kind=kind)
    return list(found.values_list("text", flat=True))


class TestTaskOpened:
    def test_the_assignee_is_told_in_the_app_and_by_email_with_a_plain_link(
        self, alices_expense, carol, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            run = alices_expense()

        task = run.human_tasks.get(node="manager_approval")
        assert told(carol, NoticeKind.TASK_ASSIGNED) == [f"New task for you: {task.title}"]
        [email] = [message for message in mail.outbox if message.to == ["carol@example.com"]]
        assert task.title in email.subject
        assert f"/tasks/{task.pk}/" in email.body
        assert "/email/" not in email.body  # opening is not deciding: no decision link

    def test_every_member_of_a_candidate_group_is_told_except_the_requester(
        self, alices_expense, alice, bob, carol, groups
    ):
        groups["finance"].user_set.add(alice)
        run = alices_expense(amount="5000.00")
        manager_task = run.human_tasks.get(node="manager_approval")

        human_tasks.approve_human_task(task_id=manager_task.pk, user=carol, channel=Channel.INBOX)

        queued = Notification.objects.filter(kind=NoticeKind.TASK_QUEUED)
        # carol approved as manager; she is in finance and still hears of the queue.
        assert sorted(queued.values_list("user__username", flat=True)) == ["bob", "carol"]


class TestHandingOver:
    def test_a_delegate_is_told_who_delegated_the_task(self, alices_expense, bob, carol):
        task = alices_expense().human_tasks.get(node="manager_approval")

        human_tasks.delegate_human_task(
            task_id=task.pk, user=carol, to_username="bob", channel=Channel.INBOX
        )

        assert told(bob, NoticeKind.TASK_DELEGATED) == [
            f"Carol delegated a task to you: {task.title}"
        ]

    def test_a_new_assignee_is_told_who_reassigned_the_task(self, alices_expense, bob, olga):
        task = alices_expense().human_tasks.get(node="manager_approval")

        human_tasks.reassign_human_task(
            task_id=task.pk, user=olga, to_username="bob", channel=Channel.INBOX
        )

        assert told(bob, NoticeKind.TASK_ASSIGNED) == [f"Olga assigned a task to you: {task.title}"]


class TestTheRequesterHears:
    def test_a_decision_names_the_decider_and_the_outcome(self, alices_expense, alice, carol):
        task = alices_expense().human_tasks.get(node="manager_approval")

        human_tasks.reject_human_task(
            task_id=task.pk, user=carol, channel=Channel.INBOX, reason="Take the bus"
        )

        assert told(alice, NoticeKind.REQUEST_DECIDED) == [
            f"Carol rejected “{task.title}”: Take the bus"
        ]

    def test_the_end_of_the_run_links_to_the_request_page(
        self, alices_expense, alice, carol, drive
    ):
        run = alices_expense()
        task = run.human_tasks.get(node="manager_approval")

        human_tasks.approve_human_task(task_id=task.pk, user=carol, channel=Channel.INBOX)
        drive(run)

        [ended] = Notification.objects.filter(user=alice, kind=NoticeKind.REQUEST_ENDED)
        assert ended.text == "Your expense request finished"
        assert ended.url == reverse("requests:detail", args=[run.pk])

    def test_a_cancelled_run_is_told_once_as_cancelled(self, alices_expense, alice):
        from workflows import engine

        run = alices_expense()

        engine.cancel_run(run_id=run.pk)

        assert told(alice, NoticeKind.REQUEST_ENDED) == ["Your expense request was cancelled"]

    def test_runs_nobody_started_tell_nobody(self, start_expense, carol):
        run = start_expense()
        task = run.human_tasks.get(node="manager_approval")

        human_tasks.approve_human_task(task_id=task.pk, user=carol, channel=Channel.INBOX)

        assert Notification.objects.filter(kind__startswith="request_").count() == 0


class TestEmailChoice:
    def test_a_digest_reader_gets_no_single_emails_but_one_digest_of_everything(
        self, alices_expense, carol, django_capture_on_commit_callbacks
    ):
        notifications.set_email_mode(user=carol, mode=EmailMode.DAILY)
        with django_capture_on_commit_callbacks(execute=True):
            alices_expense()
            alices_expense()
        assert [message for message in mail.outbox if "carol@example.com" in message.to] == []

        with django_capture_on_commit_callbacks(execute=True):
            sent = notifications.send_digests(now=timezone.now())
        with django_capture_on_commit_callbacks(execute=True):
            sent_again = notifications.send_digests(now=timezone.now())

        [digest] = [message for message in mail.outbox if "carol@example.com" in message.to]
        assert (sent, sent_again) == (1, 0)
        assert digest.subject == "[Baton] 2 updates today"
        assert digest.body.count("New task for you") == 2

    def test_turning_email_off_keeps_the_app_list(
        self, alices_expense, carol, django_capture_on_commit_callbacks
    ):
        notifications.set_email_mode(user=carol, mode=EmailMode.OFF)

        with django_capture_on_commit_callbacks(execute=True):
            alices_expense()

        assert len(told(carol)) == 1
        assert [message for message in mail.outbox if "carol@example.com" in message.to] == []
        assert notifications.send_digests(now=timezone.now()) == 0

    def test_an_unknown_choice_is_refused_and_names_the_choices(self, carol):
        with pytest.raises(ValueError, match="choose one of immediate, daily, off"):
            notifications.set_email_mode(user=carol, mode="hourly")

        assert not NotificationSettings.objects.filter(user=carol).exists()


class TestReading:
    def test_the_unread_count_stops_at_the_cap(self, carol):
        now = timezone.now()
        Notification.objects.bulk_create(
            Notification(
                user=carol, kind=NoticeKind.TASK_ASSIGNED, text="t", url="/", created_at=now
            )
            for _ in range(notifications.UNREAD_CAP + 5)
        )

        assert notifications.unread_count(user=carol) == notifications.UNREAD_CAP

    def test_marking_one_read_leaves_the_others_and_nobody_elses(self, carol, bob):
        now = timezone.now()
        mine, _other = Notification.objects.bulk_create(
            Notification(
                user=carol, kind=NoticeKind.TASK_ASSIGNED, text=text, url="/", created_at=now
            )
            for text in ("one", "two")
        )
        bobs = Notification.objects.create(
            user=bob, kind=NoticeKind.TASK_ASSIGNED, text="bob's", url="/", created_at=now
        )

        changed = notifications.mark_read(user=carol, notification_id=mine.pk, now=now)
        foreign = notifications.mark_read(user=carol, notification_id=bobs.pk, now=now)

        assert (changed, foreign) == (1, 0)
        assert notifications.unread_count(user=carol) == 1
        assert notifications.unread_count(user=bob) == 1


class TestPages:
    def test_the_list_shows_unread_and_the_badge_counts_them(self, client, alices_expense, carol):
        alices_expense()
        client.force_login(carol)

        page = client.get(reverse("approvals:notifications"))
        badge = client.get(reverse("approvals:notification_badge"), HTTP_HX_REQUEST="true")

        assert page.status_code == 200
        assert "New task for you: Expense" in page.content.decode()
        assert 'aria-label="1 unread"' in badge.content.decode()

    def test_mark_all_read_empties_the_badge(self, client, alices_expense, carol):
        alices_expense()
        client.force_login(carol)

        response = client.post(reverse("approvals:mark_read"))
        badge = client.get(reverse("approvals:notification_badge"), HTTP_HX_REQUEST="true")

        assert response.status_code == 302
        assert "unread" not in badge.content.decode()

    def test_a_mangled_id_is_refused_in_words(self, client, carol):
        client.force_login(carol)

        response = client.post(reverse("approvals:mark_read"), {"id": "1 OR 1=1"}, follow=True)

        assert "That notification could not be found." in response.content.decode()

    def test_an_unknown_email_choice_is_a_422_that_says_why(self, client, carol):
        client.force_login(carol)

        response = client.post(reverse("approvals:notifications"), {"email": "hourly"})

        assert response.status_code == 422
        assert "Unknown email choice" in response.content.decode()

    def test_signed_out_people_are_sent_to_sign_in(self, client):
        response = client.get(reverse("approvals:notification_badge"))

        assert response.status_code == 302
        assert reverse("login") in response["Location"]


def test_a_digest_covers_only_what_was_told_before_it(carol):
    notifications.set_email_mode(user=carol, mode=EmailMode.DAILY)
    now = timezone.now()
    Notification.objects.create(
        user=carol,
        kind=NoticeKind.TASK_ASSIGNED,
        text="later",
        url="/",
        created_at=now + timedelta(hours=1),
    )

    assert notifications.send_digests(now=now) == 0


class TestReminders:
    def test_the_holder_is_reminded_once_a_day_before_the_deadline(self, alices_expense, carol):
        task = alices_expense().human_tasks.get(node="manager_approval")
        assert task.remind_at == task.due_at - timedelta(days=1)

        early = human_tasks.remind_human_task(
            task_id=task.pk, now=task.remind_at - timedelta(seconds=1)
        )
        first = human_tasks.remind_human_task(task_id=task.pk, now=task.remind_at)
        again = human_tasks.remind_human_task(task_id=task.pk, now=task.remind_at)

        assert (early, first, again) == (False, True, False)
        [reminder] = told(carol, NoticeKind.TASK_DUE_SOON)
        assert reminder == f"Due {task.due_at:%Y-%m-%d %H:%M} UTC: {task.title}"

    def test_the_sweep_fires_reminders_that_are_due(self, alices_expense, carol):
        task = alices_expense().human_tasks.get(node="manager_approval")

        human_tasks.fire_due_human_tasks(now=task.remind_at)

        assert len(told(carol, NoticeKind.TASK_DUE_SOON)) == 1

    def test_a_decided_task_is_not_reminded(self, alices_expense, carol):
        task = alices_expense().human_tasks.get(node="manager_approval")
        human_tasks.approve_human_task(task_id=task.pk, user=carol, channel=Channel.INBOX)

        reminded = human_tasks.remind_human_task(task_id=task.pk, now=task.remind_at)

        assert reminded is False
        assert told(carol, NoticeKind.TASK_DUE_SOON) == []
