"""The demo services' ledger in the admin: what each key asked for and what took effect."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from workflows.examples.models import ServiceEffect


@admin.register(ServiceEffect)
class ServiceEffectAdmin(admin.ModelAdmin):
    list_display = ("service", "action", "idempotency_key", "requests_seen", "applied_at")
    list_filter = ("service", "action")
    search_fields = ("=run_id", "idempotency_key")
    readonly_fields = [field.name for field in ServiceEffect._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
