"""Personas and factories for human-task tests.

alice and bob are reviewers who report to carol (their manager); bob is in
finance and security, alice in legal; carol manages finance; olga is an
operator; eve is an outsider who may see nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.models import GroupManager, HumanTask, ReportingLine
from workflows.models import WorkflowRun


@pytest.fixture
def groups(db) -> dict[str, Group]:
    return {name: Group.objects.create(name=name) for name in ("finance", "legal", "security")}


@pytest.fixture
def people(groups) -> dict[str, User]:
    users = {
        name: User.objects.create_user(
            name, email=f"{name}@example.com", password="baton-demo", first_name=name.title()
        )
        for name in ("alice", "bob", "carol", "olga", "eve")
    }
    users["alice"].groups.add(groups["legal"])
    users["bob"].groups.add(groups["finance"], groups["security"])
    users["carol"].groups.add(groups["finance"])
    operators = Group.objects.create(name="operators")
    operators.permissions.add(Permission.objects.get(codename="operate_humantask"))
    users["olga"].groups.add(operators)
    for name in ("alice", "bob"):
        ReportingLine.objects.create(user=users[name], manager=users["carol"])
    GroupManager.objects.create(group=groups["finance"], manager=users["carol"])
    return users


@pytest.fixture
def alice(people) -> User:
    return people["alice"]


@pytest.fixture
def bob(people) -> User:
    return people["bob"]


@pytest.fixture
def carol(people) -> User:
    return people["carol"]


@pytest.fixture
def olga(people) -> User:
    return people["olga"]


@pytest.fixture
def eve(people) -> User:
    return people["eve"]


@pytest.fixture
def start_expense(people, start, drive) -> Callable[..., WorkflowRun]:
    """Start an expense and run it to its first human task."""

    def start_one(amount: str = "120.00", requester: str = "alice", **input: Any) -> WorkflowRun:
        run = start(
            "expense",
            {
                "requester": requester,
                "title": "Train to Lyon",
                "amount": amount,
                "currency": "EUR",
                **input,
            },
        )
        return drive(run)

    return start_one


@pytest.fixture
def manager_task(start_expense) -> HumanTask:
    """carol's approval of alice's 120 EUR expense."""
    run = start_expense()
    return run.human_tasks.get(node="manager_approval")
