"""The workflows app: loads the workflow modules and checks every definition."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.apps import AppConfig
from django.apps import apps as global_apps
from django.conf import settings
from django.core import checks
from django.db.models.signals import post_migrate

from workflows.checks import check_functions, check_live_versions


class WorkflowsConfig(AppConfig):
    name = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Each module registers its definitions on import, as admin modules do.
        for module in settings.BATON_WORKFLOW_MODULES:
            import_module(module)
        checks.register(check_workflow_definitions, "workflows")
        checks.register(check_data_keys, checks.Tags.security, "workflows")
        # Reads the database, so Django runs it only when told which databases to check.
        checks.register(check_live_versions, checks.Tags.database, "workflows")
        checks.register(check_functions, checks.Tags.database, "workflows")
        from workflows.engine import execute, functions, start, straight

        functions.register(
            straight.function, straight.end_function, execute.claim_function, start.start_function
        )
        # Traces, if the OTEL_* variables ask for them (see workflows.tracing).
        from workflows import tracing

        tracing.configure()
        post_migrate.connect(make_partitions_after_migrate, sender=self)
        post_migrate.connect(make_standard_calendar_after_migrate, sender=self)


def make_partitions_after_migrate(*, using: str = "default", **kwargs: Any) -> None:
    """Create this month's and the coming months' partitions as soon as the tables exist,
    rather than wait for beat's first daily pass (see workflows.partitions)."""
    from django.db import connections
    from django.utils import timezone

    from workflows import partitions

    if using == "default" and connections[using].vendor == "postgresql":
        partitions.make_partitions(now=timezone.now())


def make_standard_calendar_after_migrate(
    *, using: str = "default", apps: Any = None, **kwargs: Any
) -> None:
    """Make the standard business calendar again where it is missing, as migration 0008
    first made it (as django.contrib.sites makes its default site): a flush empties
    every table, and the calendar BusinessTime names by default should not go with it."""
    from django.db import router

    from workflows.calendars import STANDARD

    try:
        calendars = (apps or global_apps).get_model("workflows", "BusinessCalendar")
    except LookupError:  # migrated back before the calendars existed
        return
    if not router.allow_migrate_model(using, calendars):
        return
    calendars.objects.using(using).get_or_create(
        name=STANDARD,
        defaults={"description": "Monday to Friday, 09:00-17:00", "time_zone": settings.TIME_ZONE},
    )


MISSING_DATA_KEYS = "workflows.E010"


def check_data_keys(**kwargs: Any) -> list[checks.CheckMessage]:
    """Refuse to run with personal fields and no key to seal them with (workflows.personal),
    and with keys that are not Fernet keys: every start of such a type would fail."""
    from django.core.exceptions import ImproperlyConfigured

    from workflows import personal, registry

    marking = [
        str(workflow) for workflow in registry.all_definitions() if workflow.has_personal_data
    ]
    if not marking:
        return []
    try:
        personal.keys()
    except ImproperlyConfigured as error:
        return [
            checks.Error(
                str(error),
                hint=f"Types that mark fields personal: {', '.join(marking)}.",
                id=MISSING_DATA_KEYS,
            )
        ]
    return []


def check_workflow_definitions(**kwargs: Any) -> list[checks.CheckMessage]:
    """Report every registered definition that fails the static check, or starts child
    runs of a type that is not registered."""
    from workflows import registry
    from workflows.dsl import check_definition, child_type_problems

    definitions = registry.all_definitions()
    registered = {workflow.name for workflow in definitions}
    return [
        checks.Error(problem, obj=str(workflow), id="workflows.E001")
        for workflow in definitions
        for problem in [
            *check_definition(workflow),
            *child_type_problems(workflow, registered=registered),
        ]
    ]
