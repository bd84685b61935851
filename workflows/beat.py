"""Beat's scheduler: django-celery-beat's, made safe to run in several replicas.

Every beat replica sends every due schedule, so two beats send each tick twice.
This scheduler stamps each message with the tick it is for (header
`baton_scheduled_for`), computed so that every beat arrives at the same time for
the same tick; `baton.start_scheduled_workflow` keys the run it starts on the
schedule's name and that time, so the second message finds the first run and
starts nothing. It also records, every few seconds, that this beat is alive
(`workflows.heartbeats`, read by `manage.py liveness beat`).

It also ends beat promptly on SIGTERM or SIGINT, wherever the signal lands.
Celery's own handler saves the schedule from inside the signal handler: landing
in one of the scheduler's queries, it queried again on the connection that
query held, and waited for ever on that connection's lock. This scheduler
replaces that handler when it starts, with one that runs no query:
- while the scheduler is not at work (beat sleeps between ticks), it raises
  SystemExit, and celery's loop saves the schedule on its way out;
- while it sends a message, which no broker timeout bounds once retries are
  counted (a broker that stopped answering keeps the send waiting), it raises
  SystemExit too: the message may be lost, so the entry's last run time is not
  saved, and beat sends the tick again when it next starts (keyed, as below);
- while it is otherwise at work, it asks PostgreSQL to cancel the statement in flight
  (from another connection, as psql's Ctrl-C does) and notes the request; the
  scheduler then runs no further statement and leaves the tick with SystemExit.
The last save is bounded by a statement timeout, so a lock held elsewhere
cannot keep beat alive either; and so is the release of the broker connection
that follows it, which waits for the broker to acknowledge each close (RabbitMQ's
Close-Ok, with no timeout of its own): a broker that has stopped answering, or
answers late under load, cannot keep beat alive. What a cut-short save loses is each entry's
last run time, and that is safe to lose: beat then sends a tick again, whose
start is keyed on its schedule and time, and finds the run already there.
"""

from __future__ import annotations

import logging
import math
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from celery.schedules import BaseSchedule, crontab, schedule
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler
from kombu import Connection
from kombu.common import ignore_errors

from workflows import heartbeats

logger = logging.getLogger("baton.beat")

SCHEDULED_FOR_HEADER = "baton_scheduled_for"
# Seconds between two heartbeats of one beat.
HEARTBEAT_EVERY = 10.0
# Seconds each statement of the last save may take once beat is stopping
# (docker waits 10 s after SIGTERM before SIGKILL).
LAST_SAVE_STATEMENT_TIMEOUT = 3.0
# Seconds beat waits, once stopping, for the broker to acknowledge the close of its connection.
BROKER_RELEASE_TIMEOUT = 2.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def scheduled_for(*, every: BaseSchedule, last_run_at: datetime, now: datetime) -> datetime:
    """Return when the tick that is due `now` was scheduled, in UTC, the same in every beat.

    A crontab tick is its fire time: the first one after the beat's last run (so a
    beat that sends a little late, or catches up once after a pause, names the
    tick it is late for). An interval's ticks are anchored on the Unix epoch, since
    each beat counts intervals from its own last run: the tick is `now` rounded
    down to a whole number of intervals. Anything else (solar, clocked) is named by
    its due time to the second.
    """
    if isinstance(every, crontab):
        start, delta, _ = every.remaining_delta(last_run_at)
        fire = (start + delta).replace(second=0, microsecond=0)
        return fire.astimezone(UTC)
    if type(every) is schedule:
        seconds = every.run_every.total_seconds()
        ticks = math.floor(now.timestamp() / seconds)
        return datetime.fromtimestamp(ticks * seconds, tz=UTC)
    due = now + every.remaining_estimate(last_run_at)
    return datetime.fromtimestamp(round(due.timestamp()), tz=UTC)


def beat_heartbeat_name(hostname: str | None = None) -> str:
    """Return the heartbeat name of the beat on `hostname` (this host by default)."""
    return f"beat@{hostname or socket.gethostname()}"


class Scheduler(DatabaseScheduler):
    """django-celery-beat's DatabaseScheduler: ticks stamped, heartbeats kept, prompt stops.

    Concurrency: beat runs the scheduler in its main thread, and Python runs the
    signal handler in that thread too, between two bytecodes of whatever it
    interrupts; so the handler takes no lock and runs no query, and the counter
    and flag below need no lock either.
    """

    _last_heartbeat = -math.inf
    # How deep the scheduler is in its own work (ticking, saving): 0 while beat sleeps.
    _at_work = 0
    _stop_requested = False
    _last_save = False
    # Whether a message is on its way to the broker: no query runs meanwhile.
    _sending = False
    # Whether schedule_changed ran once: the change log read before it is the initial read's.
    _changes_checked = False

    def __init__(self, *args: Any, lazy: bool = False, **kwargs: Any) -> None:
        # Before the first query: setting up the schedule reads the database.
        if not lazy and threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                signal.signal(signum, self._on_stop_signal)
        with self._at_work_until_stopped():
            super().__init__(*args, lazy=lazy, **kwargs)

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        """Stop beat now if the scheduler is idle or sending, else cancel its statement and
        stop after."""
        self._stop_requested = True
        if not self._at_work or self._sending:
            raise SystemExit()
        cancel_statement_in_flight()

    @contextmanager
    def _at_work_until_stopped(self) -> Iterator[None]:
        """Mark the scheduler at work for the block, then leave with SystemExit if asked to stop.

        Under it, once a stop is requested, no new statement starts (but those of
        the last save), and the error of a statement cancelled for it becomes
        SystemExit too: celery's loop then saves the schedule on its way out.
        """
        outermost = not self._at_work
        self._at_work += 1
        try:
            if outermost:
                with connection.execute_wrapper(self._refuse_statements_once_stopping):
                    yield
            else:
                yield
        except DatabaseError:
            if outermost and self._stop_requested:
                raise SystemExit() from None
            raise
        finally:
            self._at_work -= 1
        if outermost and self._stop_requested:
            raise SystemExit()

    def _refuse_statements_once_stopping(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if self._stop_requested and not self._last_save:
            raise SystemExit()
        return execute(sql, params, many, context)

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any):
        tick = scheduled_for(
            every=entry.schedule, last_run_at=entry.last_run_at, now=timezone.now()
        )
        if advance:
            entry = self.reserve(entry)
        headers = {**entry.options.get("headers", {}), SCHEDULED_FOR_HEADER: tick.isoformat()}
        entry.options = {**entry.options, "headers": headers}
        self._sending = True
        try:
            return super().apply_async(entry, producer=producer, advance=False, **kwargs)
        except SystemExit:
            # Stopped mid-send: the tick is not saved as sent, so it is sent again.
            self._dirty.discard(entry.name)
            raise
        finally:
            self._sending = False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        with self._at_work_until_stopped():
            delay = super().tick(*args, **kwargs)
            if time.monotonic() - self._last_heartbeat >= HEARTBEAT_EVERY:
                self._last_heartbeat = time.monotonic()
                try:
                    heartbeats.record(name=beat_heartbeat_name(), now=timezone.now())
                except DatabaseError:
                    # Beat keeps sending what is due; its healthcheck will show it stale.
                    logger.warning("beat.heartbeat_failed", exc_info=True)
        return delay

    def schedule_changed(self) -> bool:
        """Return whether the schedule changed since the last check, counting the first change
        after its change log was emptied.

        django-celery-beat compares the time of the last change with the one it read
        before, and reads no change when it read none (the row gone: a flush, a restore).
        """
        emptied = self._changes_checked and self._last_timestamp is None
        changed = super().schedule_changed()
        self._changes_checked = True
        return changed or (emptied and self._last_timestamp is not None)

    def all_as_schedule(self) -> dict[str, Any]:
        """Read the schedule, first reinstalling the settings' entries whose rows are gone.

        Beat installs CELERY_BEAT_SCHEDULE (the sweep among it) when it starts; a row
        deleted since (in the admin, by a restore or a flush) would otherwise be left
        out of every later read, and the sweep would stop until each beat restarts.
        An entry disabled in the database stays disabled.
        """
        wanted = self.app.conf.beat_schedule
        present = set(self.Model.objects.filter(name__in=wanted).values_list("name", flat=True))
        for name in wanted.keys() - present:
            try:
                self.Entry.from_entry(name, app=self.app, **wanted[name])
            except Exception:  # as django-celery-beat's update_from_dict: the others still run
                if self.Model.objects.filter(name=name).exists():
                    # Another beat installed it meanwhile (two starting at once): the row
                    # is there, nothing is lost, and nobody should be paged for it.
                    logger.info("beat.entry_installed_elsewhere", extra={"entry": name})
                else:
                    logger.exception("beat.reinstall_failed", extra={"entry": name})
            else:
                logger.warning("beat.entry_reinstalled", extra={"entry": name})
        schedule = super().all_as_schedule()
        logger.info("beat.schedule_read", extra={"entries": sorted(schedule)})
        return schedule

    def _do_sync(self) -> None:
        # Celery's loop calls this between ticks to save the schedule every few minutes.
        with self._at_work_until_stopped():
            super()._do_sync()

    def close(self) -> None:
        """Save the schedule a last time, each statement bounded, and release the broker,
        waiting a bounded time for it to acknowledge.

        Celery calls this once beat leaves its loop, outside any signal handler;
        a second signal meanwhile cancels the statement in flight.
        """
        self._last_save = True
        self._at_work += 1
        # Celery's close releases the connection it finds cached here, with no bound on
        # the wait: taken out first, it is released below instead.
        self.__dict__.pop("producer", None)
        broker = self.__dict__.pop("connection", None)
        try:
            close_old_connections()
            bound_statements(seconds=LAST_SAVE_STATEMENT_TIMEOUT)
            super().close()
        finally:
            self._at_work -= 1
            if broker is not None:
                release_within(broker, seconds=BROKER_RELEASE_TIMEOUT)


def release_within(broker: Connection, *, seconds: float) -> bool:
    """Release the `broker` connection, waiting at most `seconds` for the broker to acknowledge;
    return whether it did. Never raise.

    The release runs in a daemon thread, which a broker that never answers leaves
    blocked: it holds nothing beat needs, and does not hold up the process's exit.
    """
    releasing = threading.Thread(
        target=ignore_errors, args=(broker, broker.release), name="beat-release", daemon=True
    )
    releasing.start()
    releasing.join(seconds)
    if releasing.is_alive():
        logger.warning("beat.broker_release_timed_out", extra={"seconds": seconds})
        return False
    return True


def cancel_statement_in_flight() -> None:
    """Ask PostgreSQL to cancel this thread's statement in flight, if any; never raise.

    The request travels on a connection of its own (libpq's cancel request) and
    takes no lock of the connection it cancels, so a signal handler may send it.
    """
    raw = connection.connection
    cancel = getattr(raw, "cancel_safe", None)  # psycopg 3; None on SQLite or once closed
    if cancel is None:
        return
    with suppress(Exception):  # the stop goes on: the statement ends on its own, later
        cancel(timeout=2)


def bound_statements(*, seconds: float) -> None:
    """Make PostgreSQL cancel each later statement of this connection after `seconds`."""
    if connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{seconds}s"])
    except DatabaseError:
        logger.warning("beat.statement_timeout_failed", exc_info=True)
