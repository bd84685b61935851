"""What an activity function receives, and the errors it may raise to steer the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


class NonRetryableError(Exception):
    """Raise (or subclass) to fail the step at once, whatever attempts remain."""


class ActivityCancelled(Exception):
    """Raised by `heartbeat()` when the run was cancelled: stop and let compensation run."""


class LeaseLost(Exception):
    """Raised by `heartbeat()` when this attempt no longer owns its step.

    The lease expired (a stall, a partition) and the step was handed to another
    attempt; whatever this attempt produces will not be recorded.
    """


@dataclass(frozen=True)
class ActivityContext:
    """Everything an activity may know about the step it runs in."""

    run_id: str
    node: str
    attempt: int
    # Stable for the step across every attempt and redelivery: pass it to external
    # services so that a retried call applies its effect once.
    idempotency_key: str
    input: Mapping[str, Any]
    results: Mapping[str, Any]
    correlation_id: str = ""
    # 0 on a node's first run; one more each time a GoBack sent the run back through it.
    round: int = 0
    # For a compensation: the idempotency key and result (if it has one) of the
    # step being undone.
    undoes_key: str = ""
    result_to_undo: Any = None
    # For one item of a map: the item of the list, and its index in the list.
    item: Any = None
    item_index: int | None = None
    _heartbeat: Callable[[], None] = field(default=lambda: None, repr=False)

    def heartbeat(self) -> None:
        """Report progress; raise ActivityCancelled or LeaseLost if the work should stop."""
        self._heartbeat()
