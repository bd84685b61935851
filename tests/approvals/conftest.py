"""Fixtures for the inbox's tests: tasks made directly, many and cheaply."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from approvals.human_tasks import inbox_entries
from approvals.models import HumanTask
from tests.workflows.definitions import step
from workflows import registry
from workflows.dsl import Approval, Escalation, Workflow


@pytest.fixture
def make_task(manager_task):
    """Make a task on manager_task's run and step, with the inbox entries the services
    would give it (any state, holders and candidates; no audit, no signal)."""

    def make(*, users=(), groups=(), **fields: Any) -> HumanTask:
        task = HumanTask.objects.create(
            run_id=manager_task.run_id,
            step_id=manager_task.step_id,
            node="manager_approval",
            created_at=timezone.now(),
            **{"workflow_type": "expense", "title": "A task", **fields},
        )
        task.candidate_users.set(users)
        task.candidate_groups.set(groups)
        inbox_entries.refresh(task)
        return task

    return make


@pytest.fixture
def admin_operator(olga):
    """olga, staff with the human-task admin's view and change permissions."""
    olga.is_staff = True
    olga.save()
    olga.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_humantask", "change_humantask"])
    )
    return olga


@pytest.fixture
def transition_url():
    """The admin page that applies transition `name` to a human task."""

    def url(task, name: str) -> str:
        return reverse("admin:approvals_humantask_transition", args=[task.pk, name])

    return url


AUDITED = Workflow(
    name="test_audited",
    version=1,
    start="review",
    nodes=(
        Approval(
            "review",
            title="Audit review",
            groups=("auditors",),
            escalations=(Escalation(after=timedelta(days=1), to_groups=("audit_board",)),),
            on_approve="after",
            on_reject=None,
        ),
        step("after"),
    ),
)


@pytest.fixture
def audited():
    """A type whose approval names two groups nobody made, registered for the test."""
    registry.register(AUDITED)
    yield AUDITED
    registry.unregister(AUDITED)


@pytest.fixture
def console_operator(operator) -> User:
    """olga, staff, allowed to operate runs."""
    operator.is_staff = True
    operator.save()
    return User.objects.get(pk=operator.pk)


@pytest.fixture
def viewer(people) -> User:
    """vic: staff who may view runs but not operate them."""
    user = User.objects.create_user("vic", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    return User.objects.get(pk=user.pk)
