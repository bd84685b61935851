"""Heartbeats: recorded in one row per name, judged stale by a pure rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workflows import heartbeats
from workflows.models import Heartbeat

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LIMIT = timedelta(seconds=60)


class TestWhyStale:
    def test_a_recent_heartbeat_is_alive(self):
        last = NOW - timedelta(seconds=59)

        assert heartbeats.why_stale(name="sweep", last=last, now=NOW, stale_after=LIMIT) is None

    def test_an_old_heartbeat_says_how_old_and_what_is_allowed(self):
        last = NOW - timedelta(seconds=95)

        reason = heartbeats.why_stale(name="sweep", last=last, now=NOW, stale_after=LIMIT)

        assert reason == "the last sweep was 95 s ago, more than the 60 s allowed"

    def test_no_heartbeat_at_all_says_so(self):
        reason = heartbeats.why_stale(name="sweep", last=None, now=NOW, stale_after=LIMIT)

        assert reason == "no sweep has been recorded yet"


@pytest.mark.django_db
class TestRecord:
    def test_recording_again_moves_the_one_row_forward(self):
        heartbeats.record(name="sweep", now=NOW - timedelta(seconds=5))

        heartbeats.record(name="sweep", now=NOW)

        assert list(Heartbeat.objects.values_list("name", "at")) == [("sweep", NOW)]
        assert heartbeats.last_seen(name="sweep") == NOW

    def test_a_name_never_recorded_was_never_seen(self):
        assert heartbeats.last_seen(name="beat@nowhere") is None
