"""The retry decision is a pure function of policy, attempt and error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflows.dsl import RetryPolicy
from workflows.retries import backoff, next_attempt_at

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = RetryPolicy(
    max_attempts=5,
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    max_interval=timedelta(seconds=5),
    non_retryable=("PaymentDeclined",),
)


class TestBackoff:
    def test_grows_by_the_coefficient_and_stops_at_the_maximum(self):
        waits = [backoff(policy=POLICY, attempt=n).total_seconds() for n in range(1, 6)]

        assert waits == [1, 2, 4, 5, 5]


class TestNextAttemptAt:
    def test_a_retryable_error_is_retried_after_the_backoff(self):
        retry_at = next_attempt_at(
            policy=POLICY, attempt=2, error_type="Timeout", error_is_final=False, now=NOW
        )

        assert retry_at == NOW + timedelta(seconds=2)

    def test_the_last_attempt_gives_up(self):
        retry_at = next_attempt_at(
            policy=POLICY, attempt=5, error_type="Timeout", error_is_final=False, now=NOW
        )

        assert retry_at is None

    def test_a_non_retryable_type_gives_up_at_once(self):
        retry_at = next_attempt_at(
            policy=POLICY, attempt=1, error_type="PaymentDeclined", error_is_final=False, now=NOW
        )

        assert retry_at is None

    def test_a_final_error_gives_up_at_once(self):
        retry_at = next_attempt_at(
            policy=POLICY, attempt=1, error_type="Anything", error_is_final=True, now=NOW
        )

        assert retry_at is None
