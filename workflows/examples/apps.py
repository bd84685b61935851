"""The demo services' app (their ledger); the workflow types register via BATON_WORKFLOW_MODULES."""

from __future__ import annotations

from django.apps import AppConfig


class ExamplesConfig(AppConfig):
    name = "workflows.examples"
    label = "examples"
    verbose_name = "Demo services"
    default_auto_field = "django.db.models.BigAutoField"
