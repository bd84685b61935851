"""The approvals app: human tasks, plugged into the engine when Django starts."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # checks and throttling register a system check and a signal receiver.
        from approvals import checks, steps, throttling  # noqa: F401

        steps.register()
        from approvals.inbox import selectors
        from workflows.engine import functions

        functions.register(selectors.header_function, selectors.page_function)
        from approvals.metrics import human_task_gauges
        from workflows import metrics

        metrics.add_scrape_gauges(human_task_gauges)
        from django.contrib.auth.signals import user_logged_in

        from approvals import preferences

        user_logged_in.connect(preferences.remember_on_sign_in, dispatch_uid="baton-preferences")
        from django.db.backends.signals import connection_created

        from approvals.console import sla

        connection_created.connect(sla.add_sqlite_functions, dispatch_uid="baton-sqlite-sla")
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save, pre_save

        from approvals.human_tasks import inbox_entries

        # Inbox entries show usernames: they follow a user's new one.
        user = get_user_model()
        pre_save.connect(inbox_entries.note_rename, sender=user, dispatch_uid="baton-inbox-rename")
        post_save.connect(
            inbox_entries.follow_rename, sender=user, dispatch_uid="baton-inbox-renamed"
        )
