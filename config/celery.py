"""The Celery application: configured from Django settings under the CELERY_ namespace."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("baton")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def run_system_checks(**kwargs: object) -> None:
    """Refuse to start a worker or beat on a definition that fails its static check."""
    from django.core import checks
    from django.core.management.base import SystemCheckError

    errors = [message for message in checks.run_checks() if message.is_serious()]
    if errors:
        raise SystemCheckError("\n".join(str(message) for message in errors))
