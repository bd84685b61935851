"""Out of office: a substitute takes your new tasks, and, if you ask, those you hold;
your groups' new tasks are announced to the members who are in."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from approvals import human_tasks
from approvals.models import HumanTask, Notification, Substitution
from approvals.notify import notifications
from approvals.states import NoticeKind, TaskState


def away(user, substitute, *, days: int = 3) -> Substitution:
    now = timezone.now()
    return Substitution.objects.create(
        user=user,
        substitute=substitute,
        starts_at=now - timedelta(hours=1),
        ends_at=now + timedelta(days=days),
    )


def holder_of(task: HumanTask) -> tuple[str, str | None, str]:
    task.refresh_from_db()
    return task.assignee.username, task.owner.username if task.owner else None, task.state


class TestHandingOverTheTasksYouHold:
    def test_each_task_is_delegated_to_the_substitute_and_stays_yours(
        self, manager_task, carol, bob
    ):
        handover = human_tasks.hand_over_held_tasks(user=carol, to_username="bob", channel="inbox")

        assert [task.pk for task in handover.delegated] == [manager_task.pk]
        assert handover.kept == []
        assert holder_of(manager_task) == ("bob", "carol", TaskState.DELEGATED)

    def test_the_substitute_is_told_of_each_task(self, manager_task, carol, bob):
        human_tasks.hand_over_held_tasks(user=carol, to_username="bob", channel="inbox")

        assert Notification.objects.filter(user=bob, task=manager_task).exists()

    def test_a_task_the_substitute_may_not_decide_stays_with_you_saying_why(
        self, start_expense, carol, alice
    ):
        alices = start_expense(requester="alice").human_tasks.get()
        bobs = start_expense(requester="bob").human_tasks.get()

        handover = human_tasks.hand_over_held_tasks(
            user=carol, to_username="alice", channel="inbox"
        )

        assert [task.pk for task in handover.delegated] == [bobs.pk]
        [(kept, why)] = handover.kept
        assert kept.pk == alices.pk
        assert "nobody decides their own request" in why
        assert holder_of(alices) == ("carol", None, alices.state)
        assert holder_of(bobs) == ("alice", "carol", TaskState.DELEGATED)

    def test_tasks_others_delegated_to_you_are_not_passed_on(self, manager_task, carol, bob):
        human_tasks.delegate_human_task(
            task_id=manager_task.pk, user=carol, to_username="bob", channel="inbox"
        )

        assert list(human_tasks.held_tasks(bob)) == []


class TestTheOutOfOfficePage:
    def test_offers_to_hand_over_the_tasks_you_hold(self, client, manager_task, carol):
        client.force_login(carol)

        response = client.get(reverse("approvals:away"))

        assert "hand over the 1 task I hold now" in response.text

    def test_hands_them_over_when_asked_and_says_so(self, client, manager_task, carol, bob):
        client.force_login(carol)
        today = timezone.localdate()

        response = client.post(
            reverse("approvals:away"),
            {
                "substitute": "bob",
                "starts_at": today.isoformat(),
                "ends_at": (today + timedelta(days=5)).isoformat(),
                "hand_over": "1",
            },
            follow=True,
        )

        assert "Delegated 1 task to bob" in response.text
        assert holder_of(manager_task) == ("bob", "carol", TaskState.DELEGATED)

    def test_keeps_the_tasks_you_hold_unless_asked(self, client, manager_task, carol, bob):
        client.force_login(carol)
        today = timezone.localdate()

        client.post(
            reverse("approvals:away"),
            {
                "substitute": "bob",
                "starts_at": today.isoformat(),
                "ends_at": (today + timedelta(days=5)).isoformat(),
            },
        )

        assert holder_of(manager_task)[0] == "carol"


def told_of(task: HumanTask) -> set[str]:
    return set(
        Notification.objects.filter(task=task, kind=NoticeKind.TASK_QUEUED).values_list(
            "user__username", flat=True
        )
    )


class TestGroupTasksWhileAway:
    def test_are_announced_to_the_members_who_are_in(self, bob, eve, request):
        away(bob, eve)

        task = request.getfixturevalue("finance_task")

        assert told_of(task) == {"carol"}

    def test_are_announced_to_everyone_when_every_member_is_away(
        self, make_task, groups, bob, carol, eve
    ):
        task = make_task(groups=[groups["finance"]])
        away(bob, eve)
        away(carol, eve)

        notifications.task_opened(task=task, requesters=[], now=timezone.now())

        assert told_of(task) == {"bob", "carol"}
