"""Create the demo's people and a set of runs in every state, so the demo is alive on first sight.

Safe to run again: people are updated in place and runs are started with fixed
idempotency keys, so a second seeding starts nothing new. Steps are run here,
in-process (as a worker would), so that the decisions below have tasks to act on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.utils import timezone

from approvals import human_tasks
from approvals.models import GroupManager, HumanTask, ReportingLine
from approvals.sso.accounts import operator_permissions
from approvals.states import Channel
from workflows import engine
from workflows.models import WorkflowRun
from workflows.states import StepState

PASSWORD = "baton-demo"

ORDERS: list[tuple[str, dict[str, str]]] = [
    ("goes through", {}),
    ("a flaky payment, retried", {"payment": "flaky"}),
    ("a declined payment, undone", {"payment": "decline"}),
    ("a failed shipment, refunded and released", {"shipping": "fail"}),
    ("a refund that keeps failing: dead-lettered", {"shipping": "fail", "refund": "outage"}),
    ("a slow shipment, with heartbeats", {"shipping": "slow"}),
]


class Command(BaseCommand):
    help = "Create demo people (password baton-demo) and demo workflow runs in every state."

    def handle(self, *args: Any, **options: Any) -> None:
        people = _people()
        now = timezone.now()
        for number, (story, simulate) in enumerate(ORDERS, start=1):
            self._start(
                "order",
                f"demo-order-{number}",
                story,
                {
                    "order_id": f"DEMO-{number:03}",
                    "customer_email": f"customer{number}@example.com",
                    "items": [{"sku": "BOOK-42", "quantity": number}],
                    "amount": f"{number * 19.5:.2f}",
                    "currency": "EUR",
                    "simulate": simulate,
                },
            )

        def expense(key, story, requester, title, amount, **options):
            # Sent by the requester, as from New request: it shows under their My requests.
            return self._start(
                "expense",
                key,
                story,
                {
                    "requester": requester,
                    "title": title,
                    "amount": amount,
                    "currency": "EUR",
                    "description": f"Demo: {story}.",
                },
                started_by=people[requester],
                **options,
            )

        expense("demo-expense-1", "waits for carol", "alice", "Train to Lyon", "120.00")
        # alice's, not bob's: bob is the finance group's only member who may decide it
        # (carol approved it as manager, and nobody decides their own request).
        big, created = expense(
            "demo-expense-2",
            "carol approved; finance decides",
            "alice",
            "Conference ticket",
            "1800.00",
        )
        if created:
            _decide(big, people["carol"], approve=True)
        shared, created = expense(
            "demo-expense-3", "carol delegated it to alice", "bob", "Team dinner", "300.00"
        )
        if created:
            task = shared.human_tasks.get()
            human_tasks.delegate_human_task(
                task_id=task.pk,
                user=people["carol"],
                to_username="alice",
                channel=Channel.INBOX,
                comment="Can you check this one?",
            )
        paid, created = expense(
            "demo-expense-4", "approved twice and paid", "alice", "Laptop", "2400.00"
        )
        if created:
            _decide(paid, people["carol"], approve=True)
            _decide(
                paid,
                people["bob"],
                approve=True,
                claim_first=True,
                values={"cost_centre": "IT-4100"},
            )
        refused, created = expense(
            "demo-expense-5", "rejected by carol", "alice", "Spa weekend", "500.00"
        )
        if created:
            _decide(refused, people["carol"], approve=False)
        late, created = expense(
            "demo-expense-6",
            "escalated to finance after 48 hours",
            "alice",
            "Client lunch",
            "95.00",
        )
        if created:
            # Pretend two days went by without a decision; the sweep below escalates it.
            late.human_tasks.update(
                created_at=now - timedelta(hours=50), escalate_at=now - timedelta(hours=2)
            )

        self._start(
            "vendor_onboarding",
            "demo-vendor-1",
            "legal and security review",
            {"vendor_name": "Acme Corp", "contact_email": "legal@acme.example", "country": "DE"},
        )
        halfway, created = self._start(
            "vendor_onboarding",
            "demo-vendor-2",
            "legal approved, security pending",
            {"vendor_name": "Globex", "contact_email": "hello@globex.example"},
        )
        if created:
            legal = halfway.human_tasks.get(node="legal_review")
            human_tasks.approve_human_task(
                task_id=legal.pk,
                user=people["alice"],
                channel=Channel.INBOX,
                comment="Contract reviewed.",
                values={"contract_id": "LEG-2026-014", "risk_level": "low"},
            )
        engine.sweep(now=timezone.now())  # fire the escalation that is already due
        self.stdout.write(
            self.style.SUCCESS(
                f"People: alice, bob (reviewers), carol (manager), olga (operator), admin; "
                f"password {PASSWORD}. Open http://127.0.0.1:8000/"
            )
        )

    def _start(self, workflow_type: str, key: str, story: str, data: dict, **options: Any):
        run, created = engine.start_workflow(
            workflow_type=workflow_type,
            input=data,
            idempotency_key=key,
            correlation_id=f"demo: {story}",
            **options,
        )
        if created:
            _run_ready_steps(run)
        self.stdout.write(f"{workflow_type} {run.pk} {'started' if created else 'exists'}: {story}")
        return run, created


def _run_ready_steps(run: WorkflowRun) -> None:
    """Act as a worker for this run until it waits (order runs are left to the real worker)."""
    if run.workflow_type == "order":
        return
    for _ in range(20):
        step = run.steps.filter(state=StepState.SCHEDULED).first()
        if step is None:
            return
        engine.execute_step(step_id=step.pk)


def _decide(
    run: WorkflowRun,
    user: User,
    *,
    approve: bool,
    claim_first: bool = False,
    values: dict[str, Any] | None = None,
) -> None:
    task = HumanTask.objects.get(run=run, state__in=["open", "claimed"])
    if claim_first:
        human_tasks.claim_human_task(task_id=task.pk, user=user, channel=Channel.INBOX)
    if approve:
        human_tasks.approve_human_task(
            task_id=task.pk,
            user=user,
            channel=Channel.INBOX,
            comment="Looks right.",
            values=values,
        )
    else:
        human_tasks.reject_human_task(
            task_id=task.pk, user=user, channel=Channel.INBOX, reason="Not a business expense."
        )
    _run_ready_steps(run)


def _people() -> dict[str, User]:
    groups = {
        name: Group.objects.get_or_create(name=name)[0]
        # employees start expenses, procurement vendor onboardings (Workflow.starters).
        for name in ("finance", "legal", "security", "operators", "employees", "procurement")
    }
    # The rights single sign-on gives an operator (approvals.sso.accounts).
    groups["operators"].permissions.set(operator_permissions())
    people = {
        "admin": _person("admin", "Ada", "Admin", superuser=True),
        "alice": _person("alice", "Alice", "Archer", groups=[groups["legal"], groups["employees"]]),
        "bob": _person(
            "bob",
            "Bob",
            "Baker",
            groups=[groups["finance"], groups["security"], groups["employees"]],
        ),
        "carol": _person(
            "carol",
            "Carol",
            "Carter",
            groups=[groups["finance"], groups["employees"], groups["procurement"]],
        ),
        "olga": _person("olga", "Olga", "Operator", staff=True, groups=[groups["operators"]]),
    }
    for name in ("alice", "bob"):
        ReportingLine.objects.update_or_create(
            user=people[name], defaults={"manager": people["carol"]}
        )
    GroupManager.objects.update_or_create(
        group=groups["finance"], defaults={"manager": people["carol"]}
    )
    return people


def _person(
    username: str,
    first: str,
    last: str,
    *,
    superuser: bool = False,
    staff: bool = False,
    groups: list[Group] = (),
) -> User:
    user, _ = User.objects.get_or_create(username=username)
    user.first_name, user.last_name = first, last
    user.email = f"{username}@example.com"
    user.is_superuser = superuser
    user.is_staff = staff or superuser
    user.set_password(PASSWORD)
    user.save()
    user.groups.add(*groups)
    return user
