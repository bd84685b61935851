"""A real beat on Baton's scheduler ends within seconds of SIGTERM or SIGINT, even mid-query,
and even when its broker has stopped answering.

The first tests hold a lock in a second session so that one of the beat's
statements waits in PostgreSQL, and signal the beat while it waits: the moment at
which celery's own handler used to save the schedule from inside the interrupted
query, on the connection that query held, and wait for ever. The last one puts
the beat behind a relay to RabbitMQ that stops forwarding: beat used to wait for
ever for the broker to acknowledge the close of its connection.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from tests.e2e.conftest import Cluster, end_process, scaled, wait_until
from tests.e2e.rabbitmq import ensure_virtual_host, rabbitmq_url
from tests.e2e.relay import Relay

pytestmark = pytest.mark.e2e

# Seconds a signalled beat may take to exit (scaled): docker's grace before SIGKILL is 10.
EXITS_WITHIN = 8
# Beats started and signalled per test: the signal lands somewhere else in the wait each time.
ATTEMPTS = 2

SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGINT, id="SIGINT")]


@pytest.fixture
def beats(process_env: dict[str, str], tmp_path: Path, transactional_db) -> Iterator[Cluster]:
    """Beats of this test alone (no workers), over the test database, with a schedule to send.

    Every second they send a message nothing consumes (the cluster purges the
    broker when it starts), so that each has schedule state to save.
    """
    PeriodicTask.objects.create(
        name="every-second",
        task="tests.beat_shutdown.tick",
        interval=IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS),
    )
    beats = Cluster(process_env, tmp_path)
    try:
        yield beats
    finally:
        beats.stop()


@pytest.fixture
def other_session(transactional_db) -> Iterator[psycopg.Connection]:
    """A second PostgreSQL session on the test database, to hold locks the beat waits on."""
    database = settings.DATABASES["default"]
    with psycopg.connect(
        host=database["HOST"],
        port=database["PORT"],
        user=database["USER"],
        password=database["PASSWORD"] or None,
        dbname=database["NAME"],
    ) as session:
        yield session


def waiting_on_a_lock(statement: str) -> bool:
    """Whether another session's `statement...` (the beat's) waits on a lock now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE %s",
            [f"{statement}%"],
        )
        return cursor.fetchone()[0] > 0


def sent_a_few(log: Path) -> bool:
    """Whether the beat has sent a few messages, so it has schedule state to save."""
    return log.exists() and log.read_bytes().count(b"Sending due task every-second") >= 3


def seconds_to_exit(
    beats: Cluster,
    other_session: psycopg.Connection,
    *,
    name: str,
    signum: int,
    lock: str,
    waiting: str,
    then: Callable[[], object] = lambda: None,
) -> float | None:
    """Start a beat; once `lock` (run in the other session) and `then()` make its statement
    `waiting...` wait, send it `signum`; return the seconds it took to exit, or None if it
    outlived the bound (it is killed then).
    """
    beat = beats.start_beat(name, database_scheduler=True)
    try:
        wait_until(lambda: sent_a_few(beats.logs / f"{name}.log"), timeout=60, what=name)
        with other_session.transaction():
            other_session.execute(lock)
            then()
            wait_until(lambda: waiting_on_a_lock(waiting), timeout=30, what=f"{waiting} to wait")
            signalled = time.monotonic()
            beat.send_signal(signum)
            try:
                beat.wait(timeout=scaled(EXITS_WITHIN))
            except subprocess.TimeoutExpired:
                return None
            return round(time.monotonic() - signalled, 1)
    finally:
        end_process(beat, grace=1)


class TestBeatStopsWhileItsQueryWaits:
    @pytest.mark.parametrize("signum", SIGNALS)
    def test_a_signal_during_the_schedule_check_ends_it_within_seconds(
        self, beats, other_session, signum
    ):
        exits = [
            seconds_to_exit(
                beats,
                other_session,
                name=f"beat-{attempt}",
                signum=signum,
                lock="LOCK TABLE django_celery_beat_periodictasks IN ACCESS EXCLUSIVE MODE",
                waiting='SELECT "django_celery_beat_periodictasks"',
            )
            for attempt in range(ATTEMPTS)
        ]

        assert None not in exits, f"seconds to exit, None for still running: {exits}"

    @pytest.mark.parametrize("signum", SIGNALS)
    def test_a_signal_while_it_saves_the_schedule_ends_it_within_seconds(
        self, beats, other_session, signum
    ):
        exits = [
            seconds_to_exit(
                beats,
                other_session,
                name=f"beat-{attempt}",
                signum=signum,
                lock="SELECT id FROM django_celery_beat_periodictask FOR UPDATE",
                # The beat saves its schedule before it rereads the changed one.
                then=PeriodicTasks.update_changed,
                waiting='UPDATE "django_celery_beat_periodictask"',
            )
            for attempt in range(ATTEMPTS)
        ]

        assert None not in exits, f"seconds to exit, None for still running: {exits}"


@pytest.fixture
def rabbitmq_relay() -> Iterator[Relay]:
    """A relay to the tests' RabbitMQ, which the test can make stop answering."""
    url = urlsplit(rabbitmq_url())
    ensure_virtual_host(url.geturl())
    with Relay((url.hostname or "127.0.0.1", url.port or 5672)) as relay:
        yield relay


def through(relay: Relay) -> str:
    """Return the tests' RabbitMQ URL with its host and port those of `relay`."""
    url = urlsplit(rabbitmq_url())
    return url._replace(netloc=f"{url.netloc.rsplit('@', 1)[0]}@127.0.0.1:{relay.port}").geturl()


def exits_within(process: subprocess.Popen, *, seconds: float) -> bool:
    """Wait at most `seconds` for `process` to exit; return whether it did."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


class TestBeatStopsWhenItsBrokerStopsAnswering:
    def test_a_sigterm_ends_it_within_seconds_though_the_broker_never_acknowledges_the_close(
        self, beats, rabbitmq_relay
    ):
        beats.env = {**beats.env, "CELERY_BROKER_URL": through(rabbitmq_relay)}
        beat = beats.start_beat("beat-relayed", database_scheduler=True)
        wait_until(lambda: sent_a_few(beats.logs / "beat-relayed.log"), timeout=60, what="beat")

        rabbitmq_relay.freeze()
        beat.send_signal(signal.SIGTERM)
        exited = exits_within(beat, seconds=scaled(EXITS_WITHIN))
        end_process(beat, grace=1)  # killed if still running, not left to the next test

        assert exited, f"beat still running {scaled(EXITS_WITHIN):g}s after SIGTERM"
