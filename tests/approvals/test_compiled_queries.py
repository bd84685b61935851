"""SQL compiled once from stand-ins: a call's values land where the ORM would put them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from approvals.inbox.compiled_queries import NotCompilable, compile_once
from approvals.models import InboxEntry, Snooze

pytestmark = [
    pytest.mark.django_db,
    # The inbox compiles once on PostgreSQL only, whose backend hands values to the
    # driver as they are (SQLite's turns times and UUIDs into text).
    pytest.mark.skipif(connection.vendor != "postgresql", reason="compiled on PostgreSQL only"),
]

SLOTS = {"user_id": int, "now": datetime, "title": str}


def snoozes(values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    return (
        Snooze.objects.filter(user_id=values["user_id"], until__gt=values["now"])
        .exclude(task__title=values["title"])
        .order_by("until")
        .values("task_id")[:10]
        .query.sql_with_params()
    )


class TestCompileOnce:
    def test_a_calls_values_go_where_the_orm_puts_them(self):
        values = {"user_id": 42, "now": timezone.now(), "title": "Train to Lyon"}

        bound = compile_once(snoozes, slots=SLOTS).bind(values)

        assert bound == snoozes(values)

    def test_constants_stay_as_compiled(self):
        def open_entries(values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
            return (
                InboxEntry.objects.filter(tab="queue", user_id=values["user_id"])
                .values("task_id")
                .query.sql_with_params()
            )

        compiled = compile_once(open_entries, slots={"user_id": int})

        assert compiled.bind({"user_id": 7}) == open_entries({"user_id": 7})
        assert "queue" in compiled.params

    def test_a_value_the_orm_wraps_is_wrapped_alike(self):
        def by_priority(values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
            return (
                InboxEntry.objects.filter(sort_priority=values["priority"])
                .values("task_id")
                .query.sql_with_params()
            )

        _, params = compile_once(by_priority, slots={"priority": int}).bind({"priority": -3})

        assert params == by_priority({"priority": -3})[1]
        assert type(params[0]) is type(by_priority({"priority": -3})[1][0])

    def test_a_value_derived_from_a_slot_is_refused(self):
        def due_soon(values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
            return (
                Snooze.objects.filter(until__lte=values["now"] + timedelta(days=1))
                .values("task_id")
                .query.sql_with_params()
            )

        with pytest.raises(NotCompilable, match="derived from a slot"):
            compile_once(due_soon, slots={"now": datetime})

    def test_sql_whose_text_follows_a_value_is_refused(self):
        def as_many_as(values: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
            ids = list(range(values["user_id"] % 3 + 1))
            return User.objects.filter(pk__in=ids).values("pk").query.sql_with_params()

        with pytest.raises(NotCompilable, match="SQL text changed"):
            compile_once(as_many_as, slots={"user_id": int})
