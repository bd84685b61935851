"""Celery tasks of the approvals app: thin entry points, with explicit names."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from approvals import audit
from approvals.audit import retention
from approvals.console import sla_snapshot
from approvals.notify import notifications


@shared_task(name="baton.audit_checkpoint", ignore_result=True)
def audit_checkpoint() -> None:
    """Anchor the audit chain's head (beat, every BATON_AUDIT_CHECKPOINT_MINUTES).

    A chain that no longer verifies raises AuditChainBroken, which the worker
    logs as an error, and is not anchored. Running twice writes two checkpoints
    of the same head: harmless.
    """
    audit.write_checkpoint(now=timezone.now())


@shared_task(name="baton.prune_audit", ignore_result=True)
def prune_audit() -> None:
    """Drop the audit months older than BATON_AUDIT_KEEP_DAYS (beat, daily); nothing at 0."""
    days = settings.BATON_AUDIT_KEEP_DAYS
    if days:
        now = timezone.now()
        retention.prune_audit(before=now - timedelta(days=days), now=now)


@shared_task(name="baton.send_digests", ignore_result=True)
def send_digests() -> None:
    """Email the daily digests (beat, once a day at BATON_DIGEST_HOUR UTC)."""
    notifications.send_digests(now=timezone.now())


@shared_task(name="baton.refresh_sla_snapshot", ignore_result=True)
def refresh_sla_snapshot() -> None:
    """Count the operators' SLA dashboard (beat, every BATON_SLA_SNAPSHOT_SECONDS)."""
    sla_snapshot.refresh(now=timezone.now())
