"""The engine's moves that node kinds ask for, made by the modules that dispatch over them.

A node kind's behaviour often ends in a move that involves every node kind again:
go on to the next node (entering it), leave a waiting step, fail a step (which may
undo the run, compensating child runs), start a child run. Those moves are made
by `advance` (the dispatcher over `nodes`), `execute`, `signals`, `undo`, `start`
and `children`, which all import the node modules, so a node module importing
them back would close an import circle. Node modules (and the unit of work,
which tells a parent that its child ended) call them through this table instead:
they depend only on the engine's small core, the dispatcher on them.

`workflows.engine` installs the table once it has imported every use case. A
package's `__init__` runs before any of its modules can be imported, so the
table is there before the first use case runs. Nothing here decides anything:
each field is the function of the same name in the module named above it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Moves:
    # advance
    enter_node: Callable[..., None]
    continue_to: Callable[..., None]
    leave_node: Callable[..., None]
    cancel_step: Callable[..., None]
    # execute
    claim_inline: Callable[..., Any]
    attempt_failed: Callable[..., None]
    step_failed: Callable[..., None]
    step_succeeded_after: Callable[..., None]
    # signals
    consume_signal: Callable[..., None]
    # undo
    undo_next: Callable[..., None]
    undo_lost_branches: Callable[..., None]
    mark_undone: Callable[..., None]
    cancel_run: Callable[..., Any]
    # start
    start_workflow: Callable[..., Any]
    # children
    child_ended: Callable[..., None]


_installed: Moves | None = None


def install(moves: Moves) -> None:
    """Make `moves` the engine's (called once, by `workflows.engine`)."""
    global _installed
    _installed = moves


def engine() -> Moves:
    """The moves `workflows.engine` installed."""
    if _installed is None:  # pragma: no cover - importing any engine module installs them
        raise RuntimeError("workflows.engine installs its moves when it is imported")
    return _installed
