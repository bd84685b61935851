"""Make or update the account a provider's sign-in describes: its name and email, its
groups, and its staff and operator rights, in one transaction.

Groups follow the provider: when the claims carry the groups claim, the account is
in exactly the groups it names, each made if Baton has none of that name, and in
no other (so a group removed at the provider takes its queue of tasks away at the
next sign-in). Without the claim (a provider that sends none, such as Google),
groups are left as they are, to be managed in the admin.

Rights follow a claim only where a rule is configured: with either rule set, the
account is staff when either holds; an operator also holds the operators'
permissions (`OPERATOR_PERMISSIONS`), which are taken away when the rule stops
holding. Superuser status never comes from a claim.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction
from django.db.models import Q

from approvals import audit
from approvals.sso.claims import Account

# What an operator may do: see every run, task and audit entry, operate runs and tasks.
OPERATOR_PERMISSIONS = Q(
    content_type__app_label__in=["workflows", "approvals", "examples", "auditlog"],
    codename__startswith="view_",
) | Q(codename__in=["operate_workflowrun", "operate_humantask", "change_humantask"])


def operator_permissions() -> list[Permission]:
    return list(Permission.objects.filter(OPERATOR_PERMISSIONS))


def sign_in_account(*, account: Account, now: datetime, remote_addr: str | None = None) -> Any:
    """Return the user `account` names, made on its first sign-in, updated to the claims.

    Making the account, or changing its groups, staff status or operator rights, is
    written to the audit chain with what changed; a sign-in that changes none of
    them writes nothing.
    """
    user_model = get_user_model()
    with transaction.atomic():
        user = user_model.objects.select_for_update().filter(username=account.username).first()
        created = user is None
        if user is None:
            user = user_model(username=account.username)
            # Only the provider signs this account in; an operator may set a password later.
            user.set_unusable_password()
        before = {} if created else _rights(user)
        user.email = account.email or user.email
        user.first_name = account.first_name or user.first_name
        user.last_name = account.last_name or user.last_name
        if account.is_staff is not None or account.is_operator is not None:
            user.is_staff = bool(account.is_staff or account.is_operator)
        user.save()
        if account.groups is not None:
            user.groups.set(_groups_named(account.groups))
        if account.is_operator is True:
            user.user_permissions.add(*operator_permissions())
        elif account.is_operator is False:
            user.user_permissions.remove(*operator_permissions())
        after = _rights(user)
        changes = {
            name: [before.get(name), value]
            for name, value in after.items()
            if before.get(name) != value
        }
        if changes:
            audit.record_account_sync(
                user=user,
                now=now,
                comment=(
                    "Made at the first sign-in through single sign-on."
                    if created
                    else "Changed by the claims of a sign-in through single sign-on."
                ),
                remote_addr=remote_addr,
                changes=changes,
            )
    return user


def _rights(user: Any) -> dict[str, Any]:
    """What the audit records of an account's sign-in: its groups, staff and operator rights."""
    granted = set(user.user_permissions.values_list("pk", flat=True))
    return {
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "is_staff": user.is_staff,
        "operator": {permission.pk for permission in operator_permissions()} <= granted,
    }


def _groups_named(names: frozenset[str]) -> list[Group]:
    """Return the groups of these names, making those Baton does not have yet."""
    found = {group.name: group for group in Group.objects.filter(name__in=names)}
    for name in sorted(names - found.keys()):
        found[name], _ = Group.objects.get_or_create(name=name)
    return list(found.values())
