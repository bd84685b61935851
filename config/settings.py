"""Baton's settings: one module, read from environment variables.

Every value has an embedded default so `make demo` runs on a fresh machine with
nothing else installed (SQLite in WAL mode and kombu's filesystem transport).
Production sets DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL (Redis or RabbitMQ).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BATON_VAR_DIR", BASE_DIR / "var"))


# ---------------------------------------------------------------------------
# Environment helpers
# ---------------------------------------------------------------------------


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), not {raw!r}.")


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# ---------------------------------------------------------------------------
# Core
# ---------------------------------------------------------------------------

DEBUG = env_bool("DJANGO_DEBUG", default=True)
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is false.")
    SECRET_KEY = "baton-insecure-demo-key-never-use-in-production"
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_fsm",
    "django_celery_beat",
    "django_htmx",
    "ninja",
    "template_partials",
    "auditlog",
    "workflows",
    "workflows.examples",
    "approvals",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer probes by any address, before host checks
    # and the HTTPS redirect (see workflows.health).
    "workflows.health.health_endpoints",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # No AuditlogMiddleware: approvals.audit passes actor and address itself, and
    # the middleware would overwrite the address from X-Forwarded-For, which a
    # client controls (and which would break the audit hash chain).
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ---------------------------------------------------------------------------
# Database: PostgreSQL in production, SQLite (WAL) for the demo
# ---------------------------------------------------------------------------

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'baton.sqlite3'}")
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Every query here is short and index-driven; PostgreSQL's JIT only adds its
    # compile time (seen at 177 ms on the inbox counts) to such queries.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c jit=off"
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # Web, worker and beat share one file: WAL lets readers run beside the writer,
    # IMMEDIATE transactions take the write lock up front instead of failing mid-way.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---------------------------------------------------------------------------
# Auth, i18n, static files
# ---------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("BATON_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Request bodies past this are refused (the API answers 413).
DATA_UPLOAD_MAX_MEMORY_SIZE = int(env_float("BATON_MAX_BODY_BYTES", 256 * 1024))

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
# For EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend:
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = int(env_float("EMAIL_PORT", 25))
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "baton@localhost")

# ---------------------------------------------------------------------------
# Celery: the broker carries hints, PostgreSQL holds the truth
# ---------------------------------------------------------------------------

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _folder in ("queue", "processed", "control"):
        (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    # Longer than any message may wait unacknowledged; long waits live in the
    # database, so no countdown ever comes near it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# Keep worker connections across tasks (see config.celery.reuse_database_connections);
# Celery's fix-up still closes them every this many tasks.
CELERY_DB_REUSE_MAX = 1000
# Every queue Baton sends to, declared, so a plain `celery -A config worker`
# consumes them all; `-Q baton.steps` or `-Q baton.sweep` still makes a dedicated
# worker. Each queue has its own exchange and routing key, as Celery would create it.
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name) for name in ("baton.steps", "baton.sweep")
]
CELERY_TASK_DEFAULT_QUEUE = "baton.steps"
CELERY_TASK_ROUTES = {"baton.sweep": {"queue": "baton.sweep"}}
# django-celery-beat's DatabaseScheduler, stamping each message with its tick so that
# several beats start one run per tick (see workflows.beat).
CELERY_BEAT_SCHEDULER = "workflows.beat:Scheduler"

BATON_SWEEP_INTERVAL = env_float("BATON_SWEEP_INTERVAL", 2.0)
CELERY_BEAT_SCHEDULE = {
    "baton-sweep": {
        "task": "baton.sweep",
        "schedule": BATON_SWEEP_INTERVAL,
        # A sweep that waited longer than its interval is superseded by the next one.
        "options": {"expires": max(BATON_SWEEP_INTERVAL, 1.0) * 5},
    },
}

# ---------------------------------------------------------------------------
# Engine
# ---------------------------------------------------------------------------

# Modules that register workflow definitions when imported.
BATON_WORKFLOW_MODULES = env_list(
    "BATON_WORKFLOW_MODULES", ["workflows.examples.order", "approvals.examples"]
)

# A scheduled step whose message has not been picked up within this many
# seconds is re-sent by the sweep (its first message may have been lost).
BATON_REDISPATCH_AFTER = env_float("BATON_REDISPATCH_AFTER", 30.0)
# How many due rows one sweep handles per kind of work.
BATON_SWEEP_BATCH = int(env_float("BATON_SWEEP_BATCH", 1000))

# ---------------------------------------------------------------------------
# Health and operations
# ---------------------------------------------------------------------------

# /readyz and `manage.py liveness sweep` fail when no sweep ran for this many seconds.
BATON_SWEEP_STALE_AFTER = env_float("BATON_SWEEP_STALE_AFTER", 60.0)

# Retention: runs that finished more than this many days ago are deleted, with their
# steps, events, signals and human tasks (the audit log is kept), by a task beat
# sends every 10 minutes. Off (0) by default; `manage.py prune_runs` does it by hand.
BATON_PRUNE_AFTER_DAYS = env_float("BATON_PRUNE_AFTER_DAYS", 0)
BATON_PRUNE_BATCH = int(env_float("BATON_PRUNE_BATCH", 500))
if BATON_PRUNE_AFTER_DAYS < 0 or BATON_PRUNE_BATCH < 1:
    raise ImproperlyConfigured(
        "BATON_PRUNE_AFTER_DAYS must be 0 (off) or more, and BATON_PRUNE_BATCH at least 1."
    )
if BATON_PRUNE_AFTER_DAYS:
    CELERY_BEAT_SCHEDULE["baton-prune-runs"] = {
        "task": "baton.prune_runs",
        "schedule": 600.0,
        "options": {"expires": 540.0},
    }

# ---------------------------------------------------------------------------
# Human tasks
# ---------------------------------------------------------------------------

# Where links in emails point (the public address of the web app).
BATON_BASE_URL = env_str("BATON_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
BATON_EMAIL_LINK_HOURS = env_float("BATON_EMAIL_LINK_HOURS", 72)
BATON_EXPENSE_ESCALATE_AFTER_HOURS = env_float("BATON_EXPENSE_ESCALATE_AFTER_HOURS", 48)
BATON_EXPENSE_FINANCE_THRESHOLD = env_str("BATON_EXPENSE_FINANCE_THRESHOLD", "1000")
# Seconds between refreshes of the inbox list.
BATON_INBOX_POLL_SECONDS = int(env_float("BATON_INBOX_POLL_SECONDS", 20))

# ---------------------------------------------------------------------------
# Logging: structured JSON lines carrying run id, node, attempt, correlation id
# ---------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    "loggers": {
        "baton": {
            "handlers": ["console"],
            "level": env_str("BATON_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
}
