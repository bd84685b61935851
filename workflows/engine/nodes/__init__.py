"""One module per node kind: what a run does when it enters the node, and when its step falls due.

The engine asks `kind_of(node)` instead of an isinstance chain in each use case,
so a new kind is one new module and one line below. Every function runs inside a
use case's transaction, with the run row locked, and writes through its unit of
work. Other apps add behaviour to a kind through `workflows.registry` hooks
(approvals creates and closes human tasks for `Approval`, a kind of wait).

A node module imports only the engine's small core (`work`) and plain modules,
never the use cases or `advance`, which import it: a move that involves other
node kinds again (go on, fail the step, start a child run) goes through `moves`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workflows.dsl import (
    Activity,
    Branch,
    ChildWorkflow,
    GoBack,
    Join,
    Map,
    Node,
    Parallel,
    Sleep,
    WaitForSignal,
)
from workflows.engine.nodes import (
    activity,
    branch,
    child,
    go_back,
    join,
    map,
    parallel,
    sleep,
    wait,
)


@dataclass(frozen=True)
class NodeKind:
    # enter(run, definition, node, *, came_from, round, now, work): create the node's step
    # in loop round `round`.
    enter: Callable[..., None]
    # due(run, definition, step, node, now, work): the sweep found the step due.
    due: Callable[..., None] | None = None
    # leave(run, definition, step, node, work): the step stopped waiting without ending
    # by itself (it was cancelled); `registry` hooks of other apps run after it.
    leave: Callable[..., None] | None = None


_KINDS: dict[type[Node], NodeKind] = {
    Activity: NodeKind(enter=activity.enter, due=activity.due),
    Branch: NodeKind(enter=branch.enter),
    GoBack: NodeKind(enter=go_back.enter),
    Parallel: NodeKind(enter=parallel.enter),
    Join: NodeKind(enter=join.enter),
    Sleep: NodeKind(enter=sleep.enter, due=sleep.due),
    WaitForSignal: NodeKind(enter=wait.enter, due=wait.due),
    ChildWorkflow: NodeKind(enter=child.enter, due=child.due, leave=child.leave),
    Map: NodeKind(enter=map.enter, due=map.due, leave=map.leave),
}


def kind_of(node: Node) -> NodeKind:
    """The behaviour of `node`'s kind (a subclass, such as `Approval`, shares its parent's)."""
    for node_type in type(node).__mro__:
        if node_type in _KINDS:
            return _KINDS[node_type]
    raise TypeError(f"unknown node kind {type(node).__name__}")
