"""The demo services' ledger: every request seen and every effect applied, per key."""

from __future__ import annotations

from django.db import models


class ServiceEffect(models.Model):
    """One (service, action, idempotency key): how often it was asked, and if it took effect."""

    service = models.CharField(max_length=30)
    action = models.CharField(max_length=30)
    idempotency_key = models.CharField(max_length=200)
    run_id = models.UUIDField(db_index=True)
    requests_seen = models.PositiveIntegerField(default=0)
    applied_at = models.DateTimeField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True)
    first_seen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["first_seen_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["service", "action", "idempotency_key"], name="effect_unique_per_key"
            ),
        ]

    def __str__(self) -> str:
        applied = "applied" if self.applied_at else "not applied"
        return f"{self.service}.{self.action} {self.idempotency_key} ({applied})"

    def as_dict(self) -> dict:
        return {
            "run_id": str(self.run_id),
            "service": self.service,
            "action": self.action,
            "idempotency_key": self.idempotency_key,
            "applied_at": self.applied_at.isoformat() if self.applied_at else None,
            "requests_seen": self.requests_seen,
        }
