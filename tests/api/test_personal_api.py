"""What a person can do in the inbox, they can do through the API: comment, snooze,
approve several tasks at once, read notifications, keep saved filters, be away."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from approvals.models import Comment, Notification, Snooze
from approvals.states import TaskState


def iso(moment) -> str:
    return moment.isoformat()


class TestComments:
    def test_a_reviewer_comments_and_everyone_who_sees_the_task_reads_it(
        self, api_as, manager_task
    ):
        added = api_as("carol").post(f"/tasks/{manager_task.pk}/comments", {"body": "Ticket?"})

        assert added.status_code == 201
        assert added.json()["author"] == "carol"
        listed = api_as("carol").get(f"/tasks/{manager_task.pk}/comments").json()
        assert [(c["author"], c["body"]) for c in listed] == [("carol", "Ticket?")]

    def test_an_empty_comment_is_422_and_nothing_is_kept(self, api_as, manager_task):
        response = api_as("carol").post(f"/tasks/{manager_task.pk}/comments", {"body": " "})

        assert response.status_code == 422
        assert "empty" in response.json()["detail"]
        assert not Comment.objects.exists()

    def test_on_a_task_you_may_not_see_is_404(self, api_as, manager_task):
        response = api_as("eve").post(f"/tasks/{manager_task.pk}/comments", {"body": "Hi"})

        assert response.status_code == 404
        assert api_as("eve").get(f"/tasks/{manager_task.pk}/comments").status_code == 404


class TestSnooze:
    def test_hides_the_task_from_my_list_until_then(self, api_as, manager_task):
        until = timezone.now() + timedelta(hours=2)

        response = api_as("carol").post(f"/tasks/{manager_task.pk}/snooze", {"until": iso(until)})

        assert response.status_code == 200
        assert Snooze.objects.get(task=manager_task).until == until
        assert api_as("carol").get("/tasks").json()["items"] == []

    def test_a_time_in_the_past_is_422(self, api_as, manager_task):
        until = timezone.now() - timedelta(hours=2)

        response = api_as("carol").post(f"/tasks/{manager_task.pk}/snooze", {"until": iso(until)})

        assert response.status_code == 422
        assert "future" in response.json()["detail"]

    def test_an_offset_postgresql_cannot_take_is_read_into_utc(self, api_as, manager_task):
        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/snooze", {"until": "2708-06-06T02:42:50.6+16:15"}
        )

        assert response.status_code == 200
        assert Snooze.objects.get(task=manager_task).until == datetime(
            2708, 6, 5, 10, 27, 50, 600000, tzinfo=UTC
        )

    def test_a_time_without_an_offset_is_read_as_utc(self, api_as, manager_task):
        until = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)

        response = api_as("carol").post(
            f"/tasks/{manager_task.pk}/snooze", {"until": until.replace(tzinfo=None).isoformat()}
        )

        assert response.status_code == 200
        assert Snooze.objects.get(task=manager_task).until == until


class TestBulkApprove:
    def test_approves_each_and_says_why_one_was_refused(self, api_as, start_expense):
        first = start_expense().human_tasks.get()
        second = start_expense().human_tasks.get()

        response = api_as("carol").post(
            "/tasks/bulk-approve",
            {
                "tasks": [
                    {"id": str(first.pk), "version": first.version},
                    {"id": str(second.pk), "version": second.version + 1},
                ]
            },
        )

        assert response.status_code == 200
        body = response.json()
        assert body["approved"] == 1
        assert [result["approved"] for result in body["results"]] == [True, False]
        assert body["results"][1]["error"]
        first.refresh_from_db()
        second.refresh_from_db()
        assert (first.state, second.state) == (TaskState.COMPLETED, TaskState.CLAIMED)

    def test_an_empty_selection_is_422(self, api_as):
        assert api_as("carol").post("/tasks/bulk-approve", {"tasks": []}).status_code == 422


class TestNotifications:
    def test_lists_mine_newest_first_and_marks_them_read(self, api_as, manager_task, carol):
        mine = api_as("carol").get("/me/notifications").json()

        assert mine["unread"] == 1
        [notice] = mine["items"]
        assert notice["task_id"] == str(manager_task.pk)

        marked = api_as("carol").post("/me/notifications/read", {"id": notice["id"]})

        assert marked.json() == {"marked": 1}
        assert api_as("carol").get("/me/notifications").json()["unread"] == 0

    def test_nobody_marks_someone_elses_read(self, api_as, manager_task, carol):
        notice = Notification.objects.get(user=carol)

        assert api_as("bob").post("/me/notifications/read", {"id": notice.pk}).json() == {
            "marked": 0
        }
        notice.refresh_from_db()
        assert notice.read_at is None

    def test_a_person_chooses_a_daily_digest(self, api_as, people):
        carol = api_as("carol")

        assert carol.get("/me/notification-settings").json() == {"email": "immediate"}
        assert carol.put("/me/notification-settings", {"email": "daily"}).status_code == 200
        assert carol.get("/me/notification-settings").json() == {"email": "daily"}

    def test_an_unknown_email_choice_is_422_naming_the_choices(self, api_as, people):
        response = api_as("carol").put("/me/notification-settings", {"email": "pigeon"})

        assert response.status_code == 422
        assert "immediate" in response.text


class TestSavedFilters:
    def test_saves_lists_and_deletes_a_filter(self, api_as, people):
        carol = api_as("carol")

        saved = carol.post("/me/saved-filters", {"name": "Late", "query": "tab=queue&sla=overdue"})

        assert saved.status_code == 201
        assert carol.get("/me/saved-filters").json() == [saved.json()]
        assert carol.delete(f"/me/saved-filters/{saved.json()['id']}").status_code == 204
        assert carol.get("/me/saved-filters").json() == []

    def test_someone_elses_filter_is_404_and_stays(self, api_as, people):
        saved = api_as("carol").post("/me/saved-filters", {"name": "Late"}).json()

        assert api_as("bob").delete(f"/me/saved-filters/{saved['id']}").status_code == 404
        assert len(api_as("carol").get("/me/saved-filters").json()) == 1

    def test_a_blank_name_is_422(self, api_as, people):
        response = api_as("carol").post("/me/saved-filters", {"name": "   "})

        assert response.status_code == 422
        assert "name" in response.json()["detail"]


class TestOutOfOffice:
    def test_sets_a_substitute_and_hands_over_what_i_hold(self, api_as, manager_task):
        now = timezone.now()

        response = api_as("carol").post(
            "/me/away",
            {
                "substitute": "bob",
                "starts_at": iso(now),
                "ends_at": iso(now + timedelta(days=3)),
                "hand_over": True,
            },
        )

        assert response.status_code == 201
        body = response.json()
        assert body["substitution"]["substitute"] == "bob"
        assert body["delegated"] == [str(manager_task.pk)]
        assert body["kept"] == []
        manager_task.refresh_from_db()
        assert (manager_task.assignee.username, manager_task.owner.username) == ("bob", "carol")
        assert api_as("carol").get("/me/away").json()["held"] == 0

    def test_an_end_before_the_start_is_422_and_nothing_is_handed_over(self, api_as, manager_task):
        now = timezone.now()

        response = api_as("carol").post(
            "/me/away",
            {
                "substitute": "bob",
                "starts_at": iso(now),
                "ends_at": iso(now - timedelta(days=1)),
                "hand_over": True,
            },
        )

        assert response.status_code == 422
        assert "end after it starts" in response.json()["detail"]
        manager_task.refresh_from_db()
        assert manager_task.assignee.username == "carol"

    def test_a_year_python_cannot_hold_is_422_and_no_substitute_is_set(self, api_as):
        response = api_as("carol").post(
            "/me/away",
            {
                "substitute": "bob",
                "starts_at": "2026-12-01T09:00:00Z",
                "ends_at": "9999-12-31T23:00:00-05:00",
            },
        )

        assert response.status_code == 422
        assert "must lie between" in str(response.json())
        assert api_as("carol").get("/me/away").json()["substitutions"] == []
