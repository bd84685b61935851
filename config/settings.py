"""Baton's settings: one module, read from environment variables.

The defaults are production's where safety is at stake: DEBUG is off unless
DJANGO_DEBUG asks for it, and no secret key is built in, so nothing starts
without DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE; `make demo` makes one in
var/). Everything else has an embedded default so `make demo` runs on a fresh
machine with nothing else installed (SQLite in WAL mode and kombu's filesystem
transport). Production sets DATABASE_URL (PostgreSQL) and CELERY_BROKER_URL
(Redis or RabbitMQ); README's "Production" section lists the rest.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from csp.constants import NONE, SELF
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


def env_non_negative(name: str, default: float) -> float:
    """A finite number, 0 or more (a duration, say)."""
    number = env_float(name, default)
    if not math.isfinite(number) or number < 0:
        raise ImproperlyConfigured(f"{name} must be a number, 0 or more, not {number:g}.")
    return number


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Read a comma-separated list of IP addresses and networks ("10.0.0.5,172.16.0.0/12")."""
    networks = []
    for entry in env_list(name, []):
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f'{name} must list IP addresses or networks, such as "10.0.0.5,172.16.0.0/12"; '
                f"{entry!r} is neither."
            ) from None
    return tuple(networks)


def env_header(name: str) -> tuple[str, str] | None:
    """Read "Header-Name: value" as Django's META key and value, e.g.
    ("HTTP_X_FORWARDED_PROTO", "https"); None when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, _, value = raw.partition(":")
    header, value = header.strip(), value.strip()
    if not re.fullmatch(r"[A-Za-z0-9-]+", header) or not value:
        raise ImproperlyConfigured(
            f'{name} must be "Header-Name: value", such as "X-Forwarded-Proto: https", not {raw!r}.'
        )
    return "HTTP_" + header.upper().replace("-", "_"), value


def secret_key() -> str:
    """Return DJANGO_SECRET_KEY, or else the contents of the file DJANGO_SECRET_KEY_FILE names.

    There is no default: the key signs sessions, CSRF tokens and email links, and a
    key anyone can read in the source would let them forge all three.
    """
    key = env_str("DJANGO_SECRET_KEY", "")
    path = env_str("DJANGO_SECRET_KEY_FILE", "")
    if not key and path:
        try:
            key = Path(path).read_text().strip()
        except OSError as error:
            raise ImproperlyConfigured(
                f"DJANGO_SECRET_KEY_FILE names {path!r}, which cannot be read: {error.strerror}."
            ) from None
        if not key:
            raise ImproperlyConfigured(f"DJANGO_SECRET_KEY_FILE names {path!r}, which is empty.")
    if not key:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set, and Baton has no built-in key: it signs sessions, "
            "CSRF tokens and email links, so a known key would let anyone forge them. Set "
            "DJANGO_SECRET_KEY to a long random value (python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'), or DJANGO_SECRET_KEY_FILE to a file holding "
            "one. `make demo` makes one for the demo in var/secret_key."
        )
    return key


# ---------------------------------------------------------------------------
# Core
# ---------------------------------------------------------------------------

DEBUG = env_bool("DJANGO_DEBUG", default=False)
SECRET_KEY = secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
# Other origins (scheme and host) whose form posts are accepted, e.g. https://baton.example.com.
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
    # First: /healthz, /readyz and /metrics answer probes and scrapes by any address,
    # before host checks and the HTTPS redirect (see workflows.health and
    # workflows.exposition; /metrics asks for its own token).
    "workflows.health.health_endpoints",
    "workflows.exposition.metrics_endpoint",
    # Then every other answer carries X-Request-ID and every log line its request's id.
    "config.request_ids.RequestIdMiddleware",
    # A view that cannot reach the database answers 503 and Retry-After, not 500.
    "config.outages.DatabaseOutageMiddleware",
    # With a read replica, a person who just wrote reads the primary for a few seconds
    # (workflows.replica); without one, it does nothing.
    "workflows.replica.ReadYourWritesMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The browser's Accept-Language (en or de) unless the person chose a language;
    # config.locale then applies their choice and time zone, kept in their session.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.locale.PersonalLocaleMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, so it sees each page as rendered: bidi controls from data shown as code points.
    "config.bidi.NeutraliseBidiMiddleware",
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
# HTTPS: on by default, as production needs it; the demo (Makefile), the tests
# (pyproject.toml's pytest env) and the benchmarks (bench/settings.py) speak plain
# HTTP on 127.0.0.1 and turn it off explicitly
# ---------------------------------------------------------------------------

# Redirect plain HTTP to HTTPS. Behind a proxy that terminates TLS, Django learns
# the scheme from the header in DJANGO_SECURE_PROXY_SSL_HEADER (without it, every
# request looks like plain HTTP and is redirected again). /healthz and /readyz
# answer before the redirect, so probes over plain HTTP still work.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
# Trust this header, set by the proxy, to say a request came over HTTPS, e.g.
# "X-Forwarded-Proto: https". Only behind a proxy that sets it on every request
# and that clients cannot bypass: anyone who can send it directly can pass for HTTPS.
SECURE_PROXY_SSL_HEADER = env_header("DJANGO_SECURE_PROXY_SSL_HEADER")
# Send the session and CSRF cookies over HTTPS only.
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", default=True)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", default=True)
# HTTP Strict Transport Security: browsers then refuse plain HTTP to this host and
# its subdomains for this many seconds. A commitment, so the default is an hour,
# short enough to back out of; raise it to a year (31536000) once the site serves
# HTTPS for good (docker-compose.yml does). 0 turns it off. A subdomain still served
# over plain HTTP needs DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS=false. "preload" only
# asks to be put on browsers' built-in list, which takes a max-age of a year and a
# submission at hstspreload.org: with the hour's default it commits to nothing.
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)

# ---------------------------------------------------------------------------
# What browsers may do with the pages: Content-Security-Policy and Permissions-Policy
# ---------------------------------------------------------------------------

# Scripts, styles, images, fonts and requests from this site only, and nothing inline:
# an injected <script>, style or on...= attribute does not run. Every script and style
# lives in static/ (htmx's indicator style too: see base.html), and htmx evaluates no
# expressions (allowEval off). The admin and the API's docs work under it unchanged.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
# Browser features no page of Baton uses, denied to it and to anything it could embed.
PERMISSIONS_POLICY: dict[str, list[str]] = {
    feature: []
    for feature in (
        "accelerometer",
        "autoplay",
        "camera",
        "display-capture",
        "encrypted-media",
        "gamepad",
        "geolocation",
        "gyroscope",
        "hid",
        "idle-detection",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "screen-wake-lock",
        "serial",
        "usb",
        "xr-spatial-tracking",
    )
}
# Django's own headers, said out loud: no MIME sniffing, no framing, referrers within
# this site only, and a browsing context group of its own.
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# ---------------------------------------------------------------------------
# Database: PostgreSQL in production, SQLite (WAL) for the demo
# ---------------------------------------------------------------------------

POOLERS = ("", "pgbouncer")
# Django's PostgreSQL backend with a health check that costs no round trip.
POSTGRESQL_ENGINE = "config.postgresql"
# psycopg's count of executions after which it prepares a query by itself: never, in effect.
PREPARE_WHEN_ASKED = 2**31 - 1


def database(url: str, *, pooler: str = "") -> dict:
    """Return Django's settings for the database at `url`, reached through `pooler` if any.

    `pooler` "pgbouncer" is PgBouncer in transaction mode, which hands each
    transaction whichever server connection is free, so nothing may outlive one:
    no `options` startup parameter (PgBouncer refuses the connection), no
    server-side cursors (Django's WITH HOLD cursors for `.iterator()` outside a
    transaction), no prepared statements (psycopg prepares none: Django sets its
    prepare_threshold to None, and it stays so; a direct connection prepares the
    engine's function calls). Baton's own SQL needs nothing else:
    its SET is SET LOCAL, its advisory lock is transaction-scoped, it never LISTENs.
    """
    if pooler not in POOLERS:
        raise ImproperlyConfigured(
            f"BATON_DB_POOLER must be empty or 'pgbouncer' (transaction mode), not {pooler!r}."
        )
    settings = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    if settings["ENGINE"] == "django.db.backends.postgresql":
        settings["ENGINE"] = POSTGRESQL_ENGINE
        options = settings.setdefault("OPTIONS", {})
        if pooler == "pgbouncer":
            # Turn JIT off on the server instead (README, "Behind PgBouncer").
            settings["DISABLE_SERVER_SIDE_CURSORS"] = True
            options["prepare_threshold"] = None
        else:
            # Every query here is short and index-driven; PostgreSQL's JIT only adds its
            # compile time (seen at 177 ms on the inbox counts) to such queries.
            options["options"] = "-c jit=off"
            # Prepared statements may live on this connection: the engine prepares the
            # calls of its functions (workflows.engine.functions.cursor), and nothing
            # else is (Django's cursors bind values on the client, which psycopg never
            # prepares; one that binds them on the server prepares only when asked).
            options["prepare_threshold"] = PREPARE_WHEN_ASKED
    if settings["ENGINE"] == "django.db.backends.sqlite3":
        Path(settings["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # Web, worker and beat share one file: WAL lets readers run beside the writer,
        # IMMEDIATE transactions take the write lock up front instead of failing mid-way.
        settings["CONN_MAX_AGE"] = 0
        settings["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return settings


DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'baton.sqlite3'}")
# "pgbouncer" when DATABASE_URL leads to PgBouncer in transaction mode (see `database`).
DATABASE_POOLER = env_str("BATON_DB_POOLER", "").strip().lower()
DATABASES = {"default": database(DATABASE_URL, pooler=DATABASE_POOLER)}
# A streaming replica of the primary (hot standby) for the heavy read-only pages: the
# inbox's lists and counts, the console's lists, the SLA dashboard, the API's lists. Reached
# as the primary is (BATON_DB_POOLER). Unset, everything reads the primary. See
# workflows.replica and README's "Read replica".
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL", "")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = database(DATABASE_REPLICA_URL, pooler=DATABASE_POOLER)
    if DATABASES["replica"]["ENGINE"] != POSTGRESQL_ENGINE:
        raise ImproperlyConfigured(
            "DATABASE_REPLICA_URL must be a PostgreSQL URL (postgres://...), a streaming "
            f"replica of DATABASE_URL's server, not {DATABASE_REPLICA_URL.split(':')[0]!r}."
        )
    # Seconds to give up connecting, then read the primary: without it, a replica whose
    # host drops packets would hold each page for the system's TCP timeout (minutes).
    DATABASES["replica"]["OPTIONS"].setdefault("connect_timeout", 2)
    # Under tests, the replica is the test database itself: no second one is created.
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
# After a person's write, their pages read the primary for this many seconds, so they
# see what they did however far the replica lags (0: never; only with a replica).
BATON_REPLICA_PIN_SECONDS = env_non_negative("BATON_REPLICA_PIN_SECONDS", 5.0)
# After the replica fails a read, this process reads the primary for this many seconds
# before trying the replica again (0: try it at every read).
BATON_REPLICA_RETRY_SECONDS = env_non_negative("BATON_REPLICA_RETRY_SECONDS", 10.0)
# A replica further behind than this many seconds is left alone until its next check,
# every few seconds (0: never check).
BATON_REPLICA_MAX_LAG_SECONDS = env_non_negative("BATON_REPLICA_MAX_LAG_SECONDS", 30.0)
# Without a replica, the router has no opinion and every query goes to `default`.
DATABASE_ROUTERS = ["workflows.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# ---------------------------------------------------------------------------
# Auth, i18n, static files
# ---------------------------------------------------------------------------

# Django's defaults: not like the username or email, at least 8 characters, not a
# common password, not all digits. (Demo and test users are made with set_password,
# which does not validate.)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# English by default; each person may choose German and a time zone of their own
# (approvals.preferences, activated per request by config.locale). Without a choice,
# pages follow the browser's Accept-Language and BATON_TIME_ZONE.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
# The catalogue is committed compiled (locale/de/LC_MESSAGES/django.mo): nothing to
# install to serve German; tests/test_translations.py checks it matches the .po.
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("BATON_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# Production serves the files `collectstatic` gathered (the Dockerfile runs it), under
# hashed names and compressed. BATON_STATIC_FROM_SOURCE serves them from their source
# folders instead, with no collectstatic: the demo and the test suite ask for it.
STATIC_FROM_SOURCE = env_bool("BATON_STATIC_FROM_SOURCE", default=DEBUG)
WHITENOISE_USE_FINDERS = STATIC_FROM_SOURCE
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if STATIC_FROM_SOURCE
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Attachments (approvals.human_tasks.attachments) are kept by the "default" storage:
# files under BATON_MEDIA_ROOT here, or S3 and the like with django-storages (README).
# They are never served from MEDIA_URL: only through the view that checks who may see them.
MEDIA_ROOT = env_str("BATON_MEDIA_ROOT", str(BASE_DIR / "var" / "media"))
BATON_ATTACHMENT_MAX_BYTES = int(env_float("BATON_ATTACHMENT_MAX_BYTES", 10_000_000))

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


def is_rabbitmq(broker_url: str) -> bool:
    """Return whether `broker_url` names an AMQP broker (RabbitMQ)."""
    return broker_url.startswith(("amqp://", "amqps://", "pyamqp://"))


def task_queues(broker_url: str) -> list[Queue]:
    """Return every queue Baton sends to, declared as suits the broker at `broker_url`.

    Declared, so a plain `celery -A config worker` consumes them all; `-Q baton.steps`
    or `-Q baton.sweep` still makes a dedicated worker. Each queue has its own exchange
    and routing key, as Celery would create it. On RabbitMQ they are quorum queues:
    replicated by Raft across the cluster's nodes and durable, so a message survives
    a broker node's loss, and one a worker held unacknowledged is delivered again when
    its connection drops. Their exchanges are topic exchanges (a routing key without
    wildcards matches only itself, as a direct exchange would) because Celery's native
    delayed delivery, which quorum queues need for a countdown, refuses direct ones.
    """
    if not is_rabbitmq(broker_url):
        return [Queue(name, Exchange(name), routing_key=name) for name in BATON_QUEUES]
    return [
        Queue(
            name,
            Exchange(name, type="topic"),
            routing_key=name,
            queue_arguments={"x-queue-type": "quorum"},
        )
        for name in BATON_QUEUES
    ]


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
elif not is_rabbitmq(CELERY_BROKER_URL):
    # Redis: a message not acknowledged within this many seconds is delivered again,
    # even to a second worker while the first still runs it (acks_late). Longer than
    # any message may wait unacknowledged; long waits live in the database, so no
    # countdown ever comes near it. RabbitMQ has no such timeout: it delivers an
    # unacknowledged message again only when its consumer's connection drops.
    #
    # A Redis that stops answering without closing the connection (a failover behind
    # a virtual IP, a NAT's timeout, a frozen host) would keep a publish (web,
    # worker, beat) waiting on its reply for ever: each blocking read waits at most
    # socket_timeout seconds, then the publish is retried on a new connection. A
    # consumer's BRPOP is read by the event loop when its reply has arrived, so the
    # timeout never ends a worker's wait for work (and BRPOP's own, 1 s, is shorter);
    # kombu's health check drops a BRPOP connection that stopped answering.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": 3600,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
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

BATON_QUEUES = ("baton.steps", "baton.sweep")
CELERY_TASK_QUEUES = task_queues(CELERY_BROKER_URL)
# A queue Celery declares on the fly (a task routed to a queue not listed above) is
# a quorum queue too on RabbitMQ; Redis ignores the setting.
CELERY_TASK_CREATE_MISSING_QUEUE_TYPE = "quorum" if is_rabbitmq(CELERY_BROKER_URL) else "classic"
# Quorum queues refuse a prefetch count shared by the channel (global QoS): Celery
# sees them among the queues above and sets each consumer's own count instead.
CELERY_WORKER_DETECT_QUORUM_QUEUES = True
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
# Eager dispatch, as Temporal's eager activity execution: a worker that records a
# step claims the activity that follows itself, in the same transaction, rather
# than send it through the broker for a worker to claim, up to this many in a row
# for one message (then the next is sent, so no message holds a worker for long).
# Parallel branches past the first still go out as messages. 0 sends every step.
BATON_EAGER_STEPS = env_int("BATON_EAGER_STEPS", 10)
# On PostgreSQL the hot path's compiled statements (a step's claim and record, a start)
# run as functions the migrations install, planned once per server connection instead
# of on every call (workflows/engine/functions.py); false sends the statements
# themselves, for comparison. Correct behind PgBouncer either way.
BATON_DB_FUNCTIONS = env_bool("BATON_DB_FUNCTIONS", True)

# ---------------------------------------------------------------------------
# Health and operations
# ---------------------------------------------------------------------------

# /readyz and `manage.py liveness sweep` fail when no sweep ran for this many seconds.
BATON_SWEEP_STALE_AFTER = env_float("BATON_SWEEP_STALE_AFTER", 60.0)

# Retention: runs that finished more than this many days ago are deleted, with their
# steps, events, signals and human tasks (the audit log is kept), by a task beat
# sends every 10 minutes. Off (0) by default; `manage.py prune_runs` does it by hand.
BATON_PRUNE_AFTER_DAYS = env_float("BATON_PRUNE_AFTER_DAYS", 0)
BATON_PRUNE_BATCH = int(env_float("BATON_PRUNE_BATCH", 10_000))
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

# The step events and the audit entries are partitioned by month on PostgreSQL
# (workflows.partitions): beat creates the coming months' partitions once a day.
CELERY_BEAT_SCHEDULE["baton-make-partitions"] = {
    "task": "baton.make_partitions",
    "schedule": 24 * 3600.0,
    "options": {"expires": 23 * 3600.0},
}

# ---------------------------------------------------------------------------
# Human tasks
# ---------------------------------------------------------------------------

# Outbound webhooks (approvals.notify.webhooks). Targets on private, loopback or
# link-local addresses are refused (SSRF) unless this is set: tests and on-premises
# receivers on a private network need it.
BATON_WEBHOOKS_ALLOW_PRIVATE = env_bool("BATON_WEBHOOKS_ALLOW_PRIVATE", False)
# Attempts per delivery, and the first wait between them (each next one is 4 times
# longer, at most 2 hours): 8 attempts from 5 s try for about 3 hours.
BATON_WEBHOOKS_MAX_ATTEMPTS = env_int("BATON_WEBHOOKS_MAX_ATTEMPTS", 8)
BATON_WEBHOOKS_RETRY_SECONDS = env_float("BATON_WEBHOOKS_RETRY_SECONDS", 5)
# How often each process reads again which events endpoints subscribe to (0: at every
# event, one more statement each); a new endpoint hears other processes' events from then.
BATON_WEBHOOKS_REFRESH_SECONDS = env_float("BATON_WEBHOOKS_REFRESH_SECONDS", 10)
# After an endpoint's secret is rotated, its messages carry signatures by both the new
# and the old secret for this long, so its receiver can switch over (0: the new one only).
BATON_WEBHOOKS_SECRET_OVERLAP_HOURS = env_non_negative("BATON_WEBHOOKS_SECRET_OVERLAP_HOURS", 24)
if BATON_WEBHOOKS_MAX_ATTEMPTS < 1 or BATON_WEBHOOKS_RETRY_SECONDS <= 0:
    raise ImproperlyConfigured(
        "BATON_WEBHOOKS_MAX_ATTEMPTS must be 1 or more and BATON_WEBHOOKS_RETRY_SECONDS "
        "more than 0."
    )

# Where links in emails point (the public address of the web app).
BATON_BASE_URL = env_str("BATON_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
BATON_EMAIL_LINK_HOURS = env_float("BATON_EMAIL_LINK_HOURS", 72)
# The expense's manager approval escalates to finance after this many business days
# on the `standard` business calendar (working hours and holidays, in the admin).
BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS = env_int(
    "BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS", 2
)
if BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS < 1:
    raise ImproperlyConfigured(
        "BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS must be 1 or more, "
        f"not {BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS}."
    )
if "BATON_EXPENSE_ESCALATE_AFTER_HOURS" in os.environ:
    # Refused rather than ignored: a deployment that set it expects it to count.
    raise ImproperlyConfigured(
        "BATON_EXPENSE_ESCALATE_AFTER_HOURS is no longer read: the expense now escalates "
        "after business days on the standard calendar. Set "
        "BATON_EXPENSE_ESCALATE_AFTER_BUSINESS_DAYS (default 2) and unset it."
    )
BATON_EXPENSE_FINANCE_THRESHOLD = env_str("BATON_EXPENSE_FINANCE_THRESHOLD", "1000")
# Seconds between refreshes of the inbox list.
BATON_INBOX_POLL_SECONDS = int(env_float("BATON_INBOX_POLL_SECONDS", 20))
# Whether each process keeps the HTML of the inbox rows it filled lately (approvals.inbox.rows);
# off, every row is filled afresh into its shape (the benchmark's "cold" inbox).
BATON_INBOX_ROW_CACHE = env_bool("BATON_INBOX_ROW_CACHE", True)

# ---------------------------------------------------------------------------
# Hardening: throttled credentials (django-axes) and the audit chain's key
# ---------------------------------------------------------------------------

INSTALLED_APPS += ["axes"]
# Last, so it sees the answer of every view: it turns a lockout into its 429 page.
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]
AUTHENTICATION_BACKENDS = [
    # Refuses a locked account or address before any password is checked.
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, which refuses every password while BATON_LOCAL_LOGIN is off.
    "approvals.sso.backends.PasswordBackend",
]
# Failures are counted in the database, which every web process shares (SQLite too).
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = int(env_float("BATON_LOCKOUT_FAILURES", 5))
AXES_COOLOFF_TIME = timedelta(minutes=env_float("BATON_LOCKOUT_MINUTES", 15))
# Per account and per address (see approvals.throttling.lockout_parameters).
AXES_LOCKOUT_PARAMETERS = "approvals.throttling.lockout_parameters"
# Failures are counted against the client's address, which the audit also records
# (workflows.client_address): the peer, unless a trusted proxy in front says otherwise.
AXES_CLIENT_IP_CALLABLE = "workflows.client_address.client_address"
# No proxy is trusted by default: X-Forwarded-For is ignored, since a client that
# reaches the app directly writes it. Behind proxies, name them by address or network
# (the peer must then be one of them), or say how many stand in front where nothing
# can reach the app except through them (docker-compose.yml: 1, its Caddy).
BATON_TRUSTED_PROXIES = env_networks("BATON_TRUSTED_PROXIES")
BATON_TRUSTED_PROXY_COUNT = env_int("BATON_TRUSTED_PROXY_COUNT", 0)
if BATON_TRUSTED_PROXY_COUNT < 0:
    raise ImproperlyConfigured(
        f"BATON_TRUSTED_PROXY_COUNT must be 0 or more, not {BATON_TRUSTED_PROXY_COUNT}."
    )
AXES_LOCKOUT_CALLABLE = "approvals.throttling.lockout_response"
# A lockout lasts the cool-off from the failure that caused it: retrying while
# locked neither extends it nor counts, so Retry-After is the truth.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# A success does not wipe the counters: otherwise an attacker signing in to an
# account of their own between guesses would reset their address's count.
AXES_RESET_ON_SUCCESS = False
# Successful sign-ins are not logged by axes (a table that only grows); lockouts
# are written to the audit log.
AXES_DISABLE_ACCESS_LOG = True

# Keys that encrypt the values of personal fields at rest (workflows.personal): Fernet
# keys (`Fernet.generate_key()`, see SECURITY.md), comma-separated, the first
# encrypting, every one decrypting, so a new key goes first and an old one stays until
# `manage.py rotate_data_keys` re-encrypted what it sealed. Required once a registered
# type marks a field personal (workflows.E010), unless BATON_DATA_KEYS_DERIVED=true
# derives one from DJANGO_SECRET_KEY: the demo and the tests only, as a leaked secret
# key would then open every sealed value.
BATON_DATA_KEYS = env_list("BATON_DATA_KEYS", [])
BATON_DATA_KEYS_DERIVED = env_bool("BATON_DATA_KEYS_DERIVED", False)

# The audit chain's HMAC key (approvals.audit). Keep it apart from the database
# and from DJANGO_SECRET_KEY; unset, a key is derived from DJANGO_SECRET_KEY and
# `manage.py check --deploy` warns (approvals.W001).
BATON_AUDIT_KEY = env_str("BATON_AUDIT_KEY", "")
# The chain's head is anchored by a signed checkpoint every this many minutes
# (beat), saved in the database and appended as a JSON line to this file if
# set: put it where the database's writers cannot rewrite it.
BATON_AUDIT_CHECKPOINT_FILE = env_str("BATON_AUDIT_CHECKPOINT_FILE", "")
BATON_AUDIT_CHECKPOINT_MINUTES = env_float("BATON_AUDIT_CHECKPOINT_MINUTES", 60)
# The daily digest of notifications, for people who chose one email a day.
BATON_DIGEST_HOUR = int(env_float("BATON_DIGEST_HOUR", 7))
CELERY_BEAT_SCHEDULE["baton-send-digests"] = {
    "task": "baton.send_digests",
    "schedule": crontab(minute=0, hour=BATON_DIGEST_HOUR),
    # A digest that waited past the next day's is superseded by it.
    "options": {"expires": 23 * 3600},
}
# Audit months older than this many days are dropped daily, after a checkpoint
# anchors the chain where they end (approvals.audit.retention). 0 keeps them all.
BATON_AUDIT_KEEP_DAYS = env_float("BATON_AUDIT_KEEP_DAYS", 0)
if BATON_AUDIT_KEEP_DAYS:
    CELERY_BEAT_SCHEDULE["baton-prune-audit"] = {
        "task": "baton.prune_audit",
        "schedule": 24 * 3600.0,
        "options": {"expires": 23 * 3600.0},
    }
CELERY_BEAT_SCHEDULE["baton-audit-checkpoint"] = {
    "task": "baton.audit_checkpoint",
    "schedule": BATON_AUDIT_CHECKPOINT_MINUTES * 60,
    # A checkpoint that waited past the next one's time is superseded by it.
    "options": {"expires": BATON_AUDIT_CHECKPOINT_MINUTES * 60},
}
# The operators' SLA dashboard is counted by beat this often and read back as one
# row (approvals.console.sla_snapshot); a snapshot twice this old is ignored and
# the page counts live.
BATON_SLA_SNAPSHOT_SECONDS = env_float("BATON_SLA_SNAPSHOT_SECONDS", 60)
CELERY_BEAT_SCHEDULE["baton-refresh-sla-snapshot"] = {
    "task": "baton.refresh_sla_snapshot",
    "schedule": BATON_SLA_SNAPSHOT_SECONDS,
    # A count that waited past the next one's time is superseded by it.
    "options": {"expires": BATON_SLA_SNAPSHOT_SECONDS},
}

# ---------------------------------------------------------------------------
# Single sign-on: OpenID Connect (mozilla-django-oidc; see approvals.sso and README)
# ---------------------------------------------------------------------------

# Off unless a client id is set; `manage.py check` warns (approvals.W003) when it is
# set without what sign-in needs, or when passwords are off with no SSO to replace them.
BATON_OIDC_CLIENT_ID = env_str("BATON_OIDC_CLIENT_ID", "")
BATON_OIDC_ENABLED = bool(BATON_OIDC_CLIENT_ID)
# The provider's issuer, exactly as its discovery document and tokens write it.
BATON_OIDC_ISSUER = env_str("BATON_OIDC_ISSUER", "")
# What the login page's button says: "Sign in with <this>".
BATON_OIDC_PROVIDER_NAME = env_str("BATON_OIDC_PROVIDER_NAME", "single sign-on")
# Which claim names the account (its username), which lists its groups, and which
# grant staff and operator rights: "claim" (true when the claim is true) or
# "claim=value" (true when the claim is that value or a list holding it). Unset,
# staff and operator rights are not managed by sign-in.
BATON_OIDC_USERNAME_CLAIM = env_str("BATON_OIDC_USERNAME_CLAIM", "preferred_username")
BATON_OIDC_GROUPS_CLAIM = env_str("BATON_OIDC_GROUPS_CLAIM", "groups")
BATON_OIDC_STAFF_CLAIM = env_str("BATON_OIDC_STAFF_CLAIM", "")
BATON_OIDC_OPERATOR_CLAIM = env_str("BATON_OIDC_OPERATOR_CLAIM", "")
# The `aud` the provider writes into access tokens meant for Baton's API; unset, the
# API accepts only Baton's own tokens and the browser's session.
BATON_OIDC_API_AUDIENCE = env_str("BATON_OIDC_API_AUDIENCE", "")
# Off, nobody signs in with a password (the inbox's sign-in and the admin's): only SSO.
BATON_LOCAL_LOGIN = env_bool("BATON_LOCAL_LOGIN", True)

# mozilla-django-oidc's own names, from the above.
OIDC_RP_CLIENT_ID = BATON_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = env_str("BATON_OIDC_CLIENT_SECRET", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("BATON_OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("BATON_OIDC_TOKEN_ENDPOINT", "")
# Optional: without it, the claims are the ID token's (approvals.sso.backends).
OIDC_OP_USER_ENDPOINT = env_str("BATON_OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("BATON_OIDC_JWKS_URI", "")
OIDC_RP_SIGN_ALGO = env_str("BATON_OIDC_SIGN_ALGORITHM", "RS256")
OIDC_RP_SCOPES = env_str("BATON_OIDC_SCOPES", "openid email profile")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env_float("BATON_OIDC_TIMEOUT_SECONDS", 10)
# A failed or refused provider sign-in lands on the login page, which says so.
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
if BATON_OIDC_ENABLED:
    AUTHENTICATION_BACKENDS += ["approvals.sso.backends.ProviderBackend"]

# ---------------------------------------------------------------------------
# Metrics (Prometheus) and traces (OpenTelemetry): both off unless asked for
# ---------------------------------------------------------------------------

# /metrics (web) and each worker's metrics port answer only
# "Authorization: Bearer <this token>"; unset, /metrics answers 404 and workers open no port.
BATON_METRICS_TOKEN = env_str("BATON_METRICS_TOKEN", "")
# A worker serves its metrics on this port (0: none), on this address.
BATON_METRICS_PORT = env_int("BATON_METRICS_PORT", 0)
# Every address by default (Prometheus scrapes from another host): the token guards it.
BATON_METRICS_ADDRESS = env_str("BATON_METRICS_ADDRESS", "0.0.0.0")  # nosec B104
if BATON_METRICS_PORT and not BATON_METRICS_TOKEN:
    raise ImproperlyConfigured(
        "BATON_METRICS_PORT is set but BATON_METRICS_TOKEN is not: set a long random token "
        "for Prometheus to send, or unset the port."
    )
if BATON_METRICS_PORT and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    raise ImproperlyConfigured(
        "BATON_METRICS_PORT is set but PROMETHEUS_MULTIPROC_DIR is not: a worker's pool "
        "processes would each count alone. Set it to an empty directory of this worker's own."
    )
# Traces: the standard OTEL_* variables turn them on (see workflows.tracing), e.g.
# OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 and OTEL_SERVICE_NAME=baton-web.

# ---------------------------------------------------------------------------
# Logging: structured JSON lines to stderr carrying the request id, run id, node,
# attempt and correlation id (BATON_LOG_FORMAT=text for plain lines: the demo)
# ---------------------------------------------------------------------------

BATON_LOG_FORMAT = env_str("BATON_LOG_FORMAT", "json")
if BATON_LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"BATON_LOG_FORMAT must be json or text, not {BATON_LOG_FORMAT!r}.")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "config.request_ids.RequestIdFilter"},
        # trace_id and span_id, while traces are on (workflows.tracing).
        "trace_ids": {"()": "workflows.tracing.TraceIdsFilter"},
    },
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s",
        },
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": BATON_LOG_FORMAT,
            "filters": ["request_id", "trace_ids"],
        },
    },
    "loggers": {
        "baton": {
            "handlers": ["console"],
            "level": env_str("BATON_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
        # Django's own warnings (a disallowed host, a suspicious request) and, through
        # django.request, every unhandled error with its traceback and every 5xx answer
        # of the pages and the API. Django's default prints these only while DEBUG is on.
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
        "django.request": {"level": "ERROR"},
        # Celery's workers and beats leave logging to this (config.celery), so their
        # lines (a worker ready, a task failed with its traceback) come out alike.
        "celery": {
            "handlers": ["console"],
            "level": env_str("BATON_CELERY_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
    # Anything else (an activity's own logger, a library's warning), at WARNING and up.
    "root": {"handlers": ["console"], "level": "WARNING"},
}
