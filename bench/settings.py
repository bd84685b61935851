"""Settings for every benchmark process: Baton's own settings, plus a bare page and a queue.

Each process of a run (the driver, Celery workers, gunicorn) uses this module, so
they all share what is changed here and nothing else:

- `/bench/bare/`, a 25-row template page behind the same login as the inbox, the
  baseline the inbox is compared with (its own ROOT_URLCONF, so Baton's stay untouched);
- a queue of its own (BENCH_QUEUE, set by the driver per database name), so a
  worker of another checkout or another benchmark run on the same broker never
  takes this run's messages (and the reverse);
- static files served as in DEBUG, so DEBUG can be off without running collectstatic;
- HTTPS off (no redirect, no HSTS, cookies over HTTP): gunicorn serves plain HTTP on
  127.0.0.1, as in the tests;
- personal fields sealed under a key derived from the secret key, as in the demo.
"""

from __future__ import annotations

import os
from pathlib import Path

from config.settings import *  # noqa: F403
from config.settings import BATON_DATA_KEYS, TEMPLATES

ROOT_URLCONF = "bench.urls"
TEMPLATES[0]["DIRS"] = [*TEMPLATES[0]["DIRS"], Path(__file__).resolve().parent / "templates"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("BENCH_QUEUE") or "bench.steps"
SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
# The shipped types' personal fields, sealed under a key derived from the bench's
# secret key unless keys are given.
BATON_DATA_KEYS_DERIVED = not BATON_DATA_KEYS
