"""The approvals app: human tasks, plugged into the engine when Django starts."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals import steps, throttling  # noqa: F401  (throttling connects its receiver)

        steps.register()
