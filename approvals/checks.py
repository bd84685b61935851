"""System checks of the approvals app: its production settings, and the task forms."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.security, deploy=True)
def check_audit_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn when the audit chain's key is derived from SECRET_KEY instead of its own."""
    if settings.BATON_AUDIT_KEY:
        return []
    return [
        checks.Warning(
            "BATON_AUDIT_KEY is not set: the audit chain is keyed from DJANGO_SECRET_KEY.",
            hint=(
                "Whoever learns DJANGO_SECRET_KEY could then rewrite the audit log "
                "undetected, and rotating it makes every entry fail verify_audit. Set "
                "BATON_AUDIT_KEY to a long random secret kept apart from both (before "
                "upgrading, so the upgrade re-hashes the log with it)."
            ),
            id="approvals.W001",
        )
    ]


@checks.register()
def check_task_forms(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Report every approval form that a reviewer could not fill in on the task's page."""
    from approvals import task_forms
    from workflows import registry

    return [
        checks.Error(problem, obj=str(workflow), id="approvals.E001")
        for workflow in registry.all_definitions()
        for problem in task_forms.drawing_problems(workflow)
    ]
