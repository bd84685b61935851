"""System checks of the approvals app: its production settings, the task forms, and the
groups that approvals name."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

MISSING_GROUP = "approvals.E002"
UNCHECKED_GROUPS = "approvals.W002"


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


def named_groups() -> dict[str, list[str]]:
    """Return each group name the registered definitions give an approval or one of its
    escalations, with where (type, version, node) it is named."""
    from workflows import registry
    from workflows.dsl import Approval

    named: dict[str, list[str]] = {}
    for workflow in registry.all_definitions():
        for node in workflow.nodes:
            if not isinstance(node, Approval):
                continue
            where = f"{workflow.name} v{workflow.version}, approval {node.name!r}"
            for name in node.groups:
                named.setdefault(name, []).append(where)
            for level, escalation in enumerate(node.escalations, start=1):
                for name in escalation.to_groups:
                    named.setdefault(name, []).append(f"{where} (escalation {level})")
    return named


def check_named_groups(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Report each group an approval names that does not exist: its task would reach
    nobody, and nobody would be told.

    Groups are rows, so this reads the database, and only where Django is told which
    databases to check. It is a deployment check (`manage.py check --deploy --database
    default`): inside `migrate`, an error would keep a new installation from ever
    starting, since its groups are made once its tables are. At run time, an approval
    that meets a missing group warns on its run's timeline (approvals.human_tasks).
    """
    if not databases:
        return []
    from django.contrib.auth.models import Group

    named = named_groups()
    messages: list[checks.CheckMessage] = []
    for alias in databases:
        try:
            existing = set(
                Group.objects.using(alias).filter(name__in=named).values_list("name", flat=True)
            )
        except DatabaseError as error:
            messages.append(
                checks.Warning(
                    "Could not check that the groups approvals name exist: the database "
                    f"{alias!r} did not answer ({type(error).__name__}).",
                    id=UNCHECKED_GROUPS,
                )
            )
            continue
        messages.extend(
            checks.Error(
                f"Group {name!r} does not exist, but {'; '.join(named[name])} names it: "
                "its tasks would reach nobody in it.",
                hint=(
                    "Create the group (admin, Groups) and add its members, or correct the "
                    "name in the definition."
                ),
                obj=name,
                id=MISSING_GROUP,
            )
            for name in sorted(named.keys() - existing)
        )
    return messages


checks.register(check_named_groups, checks.Tags.database, deploy=True)


HALF_CONFIGURED_SSO = "approvals.W003"

# What signing in through the provider needs, by the environment variable that sets it.
SSO_NEEDS = {
    "BATON_OIDC_CLIENT_SECRET": "OIDC_RP_CLIENT_SECRET",
    "BATON_OIDC_ISSUER": "BATON_OIDC_ISSUER",
    "BATON_OIDC_AUTHORIZATION_ENDPOINT": "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "BATON_OIDC_TOKEN_ENDPOINT": "OIDC_OP_TOKEN_ENDPOINT",
    "BATON_OIDC_JWKS_URI": "OIDC_OP_JWKS_ENDPOINT",
}


@checks.register(checks.Tags.security)
def check_single_sign_on(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Warn about single sign-on set up by half: a client id without what signing in
    needs, provider settings without a client id, or passwords off with no provider."""
    missing = [name for name, setting in SSO_NEEDS.items() if not getattr(settings, setting)]
    problems = []
    if settings.BATON_OIDC_ENABLED and missing:
        problems.append(
            checks.Warning(
                f"Single sign-on is half configured: BATON_OIDC_CLIENT_ID is set but "
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not.",
                hint="Set them from the provider's discovery document (README, Single sign-on).",
                id=HALF_CONFIGURED_SSO,
            )
        )
    if not settings.BATON_OIDC_ENABLED and len(missing) < len(SSO_NEEDS):
        problems.append(
            checks.Warning(
                "Single sign-on is half configured: provider settings (BATON_OIDC_*) are set "
                "but BATON_OIDC_CLIENT_ID is not, so nobody can sign in through the provider.",
                hint="Set BATON_OIDC_CLIENT_ID, or remove the other BATON_OIDC_* settings.",
                id=HALF_CONFIGURED_SSO,
            )
        )
    if not settings.BATON_LOCAL_LOGIN and not settings.BATON_OIDC_ENABLED:
        problems.append(
            checks.Warning(
                "BATON_LOCAL_LOGIN is false but no single sign-on provider is configured: "
                "nobody can sign in.",
                hint="Configure the provider (BATON_OIDC_*), or set BATON_LOCAL_LOGIN=true.",
                id=HALF_CONFIGURED_SSO,
            )
        )
    if settings.BATON_OIDC_API_AUDIENCE and not settings.BATON_OIDC_ENABLED:
        problems.append(
            checks.Warning(
                "BATON_OIDC_API_AUDIENCE is set without single sign-on: the API accepts no "
                "provider tokens.",
                hint="Configure the provider (BATON_OIDC_*), or unset BATON_OIDC_API_AUDIENCE.",
                id=HALF_CONFIGURED_SSO,
            )
        )
    return problems
