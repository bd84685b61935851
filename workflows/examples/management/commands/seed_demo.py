"""Create the demo's users and start a set of runs, so the demo is alive on first sight.

Safe to run again: users are updated in place and runs are started with fixed
idempotency keys, so a second seeding starts nothing new.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.core.management.base import BaseCommand

from workflows import engine

PASSWORD = "baton-demo"

DEMO_ORDERS: list[tuple[str, dict[str, str]]] = [
    ("goes through", {}),
    ("a flaky payment, retried", {"payment": "flaky"}),
    ("a declined payment, undone", {"payment": "decline"}),
    ("a failed shipment, refunded and released", {"shipping": "fail"}),
    ("a refund that keeps failing: dead-lettered", {"shipping": "fail", "refund": "outage"}),
    ("a slow shipment, with heartbeats", {"shipping": "slow"}),
]


class Command(BaseCommand):
    help = "Create demo users (password baton-demo) and start demo workflow runs."

    def handle(self, *args: Any, **options: Any) -> None:
        operators, _ = Group.objects.get_or_create(name="operators")
        operators.permissions.set(
            Permission.objects.filter(
                content_type__app_label__in=["workflows", "examples"],
                codename__startswith="view_",
            )
            | Permission.objects.filter(codename="operate_workflowrun")
        )
        _user("admin", superuser=True)
        _user("olga", staff=True).groups.add(operators)

        for number, (story, simulate) in enumerate(DEMO_ORDERS, start=1):
            run, created = engine.start_workflow(
                workflow_type="order",
                input={
                    "order_id": f"DEMO-{number:03}",
                    "customer_email": f"customer{number}@example.com",
                    "items": [{"sku": "BOOK-42", "quantity": number}],
                    "amount": f"{number * 19.5:.2f}",
                    "currency": "EUR",
                    "simulate": simulate,
                },
                idempotency_key=f"demo-order-{number}",
                correlation_id=f"demo: {story}",
            )
            verb = "started" if created else "exists"
            self.stdout.write(f"order {run.pk} {verb}: {story}")
        self.stdout.write(self.style.SUCCESS(f"Demo users: admin, olga (password {PASSWORD})."))


def _user(username: str, *, superuser: bool = False, staff: bool = False) -> User:
    user, _ = User.objects.get_or_create(username=username)
    user.is_superuser = superuser
    user.is_staff = staff or superuser
    user.set_password(PASSWORD)
    user.save()
    return user
