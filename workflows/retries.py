"""The retry decision: an error and an attempt number in, the next attempt's time or None out."""

from __future__ import annotations

from datetime import datetime, timedelta

from workflows.activity import NonRetryableError
from workflows.dsl import RetryPolicy


def backoff(*, policy: RetryPolicy, attempt: int) -> timedelta:
    """Return the wait after failed attempt number `attempt` (1-based), capped by the policy."""
    seconds = policy.initial_interval.total_seconds() * policy.backoff_coefficient ** (attempt - 1)
    return min(timedelta(seconds=seconds), policy.max_interval)


def is_retryable(*, policy: RetryPolicy, error_type: str, error_is_final: bool = False) -> bool:
    return not error_is_final and error_type not in policy.non_retryable


def next_attempt_at(
    *,
    policy: RetryPolicy,
    attempt: int,
    error_type: str,
    error_is_final: bool,
    now: datetime,
) -> datetime | None:
    """Return when to try again after `attempt` failed, or None to give up for good."""
    if not is_retryable(policy=policy, error_type=error_type, error_is_final=error_is_final):
        return None
    if attempt >= policy.max_attempts:
        return None
    return now + backoff(policy=policy, attempt=attempt)


def is_final_error(error: BaseException) -> bool:
    """Tell whether an exception says by its type that no retry can help."""
    return isinstance(error, NonRetryableError)
