"""Moving live runs from one version of a workflow type to another: the plan, and for each
run whether it can move and why not. Pure: definitions and run positions in, verdicts out.

A plan maps each node of the source version to the target's node of the same name,
unless an explicit rename maps it to another. A run can move when:

- it moves forward (pending, running, waiting or paused), rather than undoing its steps;
- none of its activities is running (its outcome would be recorded against a version
  the run is no longer on);
- every node it is at exists in the target as a node of the same kind, inside the
  parallel region of the same join, and a waiting approval asks for as many
  approvals as before (its open human tasks were made for that number);
- every completed step the source would undo if the run failed can still be undone:
  the target's node is a mutating activity with a compensation;
- the data the target's later nodes need is there. That is known two ways: the
  target's input schema must accept the run's input (the run then keeps the input as
  the target reads it, defaults filled in, as a start would have stored it), and
  each node still ahead of the run in the target (reachable from where it is) must
  find the results it declares in `Node.needs`: the needed node has run, or is
  itself still ahead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.dsl import Activity, Approval, InvalidInput, Join, Node, Workflow
from workflows.states import LIVE_STEP_STATES, RunState, StepKind, StepState

# Runs that move forward through their graph; the others are undoing it.
MOVABLE_RUN_STATES = (RunState.PENDING, RunState.RUNNING, RunState.WAITING, RunState.PAUSED)
# A step's result stays part of the run's data after the step is undone (workflows.results).
_DONE_STEP_STATES = (StepState.SUCCEEDED, StepState.COMPENSATED)
# Finished steps the undo may compensate (workflows.compensation decides which).
_FINISHED_STEP_STATES = (StepState.SUCCEEDED, StepState.FAILED, StepState.CANCELLED)


class InvalidMigration(ValueError):
    """The plan itself cannot be followed; `problems` names each reason."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True)
class StepAt:
    """What the verdict needs to know of one step of a run."""

    node: str
    state: str
    kind: str = StepKind.FORWARD
    attempt: int = 0
    # Some attempt may have taken effect although the step did not succeed.
    may_have_applied: bool = False


@dataclass(frozen=True)
class RunPosition:
    """Where a run is: its state, its input and its steps."""

    run_id: Any
    state: str
    input: Any
    steps: tuple[StepAt, ...] = ()

    @property
    def at(self) -> tuple[str, ...]:
        """The source nodes the run is at: those of its live forward steps."""
        live = {step.node for step in self.steps if _is_live_forward(step)}
        return tuple(sorted(live))


@dataclass(frozen=True)
class Verdict:
    """Whether one run can move, and every reason it cannot."""

    run_id: Any
    state: str
    at: tuple[str, ...]
    reasons: tuple[str, ...] = ()
    # The run's input as the target reads it (None when it does not fit).
    input: Any = None

    @property
    def can_move(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class MigrationPlan:
    """Which node of `target` each node of `source` becomes."""

    source: Workflow
    target: Workflow
    renames: Mapping[str, str] = field(default_factory=dict)

    def target_name(self, source_node: str) -> str:
        return self.renames.get(source_node, source_node)

    def step_renames(self) -> dict[str, str]:
        """The renames that change a name: what a moved run's step rows are renamed by."""
        return {old: new for old, new in self.renames.items() if old != new}

    def judge(self, run: RunPosition) -> Verdict:
        """Say whether `run` can move to the target version, with every reason it cannot."""
        if run.state not in MOVABLE_RUN_STATES:
            reason = (
                f"it is {run.state}: only a pending, running, waiting or paused run can move "
                f"(one that is undoing its steps finishes on {self.source})"
            )
            return Verdict(run_id=run.run_id, state=run.state, at=run.at, reasons=(reason,))
        reasons = [
            f"its activity {step.node!r} is running (attempt {step.attempt}): try again once "
            "it has finished"
            for step in run.steps
            if step.state == StepState.RUNNING
        ]
        live = [step for step in run.steps if _is_live_forward(step)]
        for name in sorted({step.node for step in live}):
            reasons.extend(self._position_problems(name))
        reasons.extend(self._undo_problems(run.steps))
        data = None
        try:
            data = self.target.validate_input(run.input)
        except InvalidInput as invalid:
            fields = "; ".join(f"{error['field']}: {error['message']}" for error in invalid.errors)
            reasons.append(f"its input does not fit {self.target}'s input schema ({fields})")
        reasons.extend(self._needs_problems(run, live))
        return Verdict(
            run_id=run.run_id,
            state=run.state,
            at=run.at,
            reasons=tuple(reasons),
            input=data if not reasons else None,
        )

    # -- the checks ---------------------------------------------------------

    def _position_problems(self, source_name: str) -> list[str]:
        """Whether the target has a node the run can wait, or be scheduled, at instead."""
        source_node = self.source.nodes_by_name.get(source_name)
        target_name = self.target_name(source_name)
        target_node = self.target.nodes_by_name.get(target_name)
        if target_node is None:
            return [
                f"it is at {source_name!r}, and {self.target} has no node {target_name!r} "
                f"(name the node it becomes with a rename: {source_name}=NEW)"
            ]
        if source_node is None:  # a step of a node the source no longer has: leave it alone
            return [f"it is at {source_name!r}, which {self.source} does not define"]
        if type(source_node) is not type(target_node):
            return [
                f"it is at {source_name!r}, a {_kind(source_node)} in {self.source}, but "
                f"{self.target}'s {target_name!r} is a {_kind(target_node)}"
            ]
        problems = []
        source_join = self.source.join_of.get(source_name)
        target_join = self.target.join_of.get(target_name)
        expected_join = self.target_name(source_join) if source_join else None
        if target_join != expected_join:
            where = (
                f"inside the parallel region closed by {source_join!r}"
                if source_join
                else "outside any parallel region"
            )
            there = (
                f"inside the region closed by {target_join!r}"
                if target_join
                else "outside any parallel region"
            )
            problems.append(
                f"it is at {source_name!r}, {where} in {self.source}, but "
                f"{self.target}'s {target_name!r} is {there}"
            )
        join = source_name if isinstance(source_node, Join) else source_join
        if join is not None and not problems:
            problems.extend(self._join_problems(join))
        if (
            isinstance(source_node, Approval)
            and isinstance(target_node, Approval)
            and source_node.required != target_node.required
        ):
            problems.append(
                f"it waits at the approval {source_name!r}, which takes "
                f"{source_node.required} approval(s) in {self.source} but "
                f"{target_node.required} in {self.target}: its open tasks were made for "
                f"{source_node.required}"
            )
        return problems

    def _join_problems(self, source_join: str) -> list[str]:
        target_join = self.target_name(source_join)
        wanted = _required(self.source, source_join)
        target_wanted = _required(self.target, target_join)
        if target_wanted is None or wanted == target_wanted:
            return []
        return [
            f"its parallel branches meet at {source_join!r}, which waits for {wanted} of them "
            f"in {self.source} but for {target_wanted} in {self.target}"
        ]

    def _undo_problems(self, steps: Iterable[StepAt]) -> list[str]:
        problems = []
        seen: set[str] = set()
        for step in steps:
            if step.kind != StepKind.FORWARD or step.node in seen:
                continue
            applied = step.state == StepState.SUCCEEDED or (
                step.state in _FINISHED_STEP_STATES and step.may_have_applied
            )
            if not applied or not _undoable(self.source.nodes_by_name.get(step.node)):
                continue
            seen.add(step.node)
            target_name = self.target_name(step.node)
            target_node = self.target.nodes_by_name.get(target_name)
            if target_node is None:
                problems.append(
                    f"its step {step.node!r} took effect and would be undone if the run failed, "
                    f"but {self.target} has no node {target_name!r} to undo it with"
                )
            elif not _undoable(target_node):
                problems.append(
                    f"its step {step.node!r} took effect and would be undone if the run failed, "
                    f"but {self.target}'s {target_name!r} has no compensation to undo it with"
                )
        return problems

    def _needs_problems(self, run: RunPosition, live: list[StepAt]) -> list[str]:
        if run.state == RunState.PENDING or not run.steps:
            starts: tuple[str, ...] = (self.target.start,)
        else:
            starts = tuple(self.target_name(step.node) for step in live)
        ahead = _reachable(self.target, starts)
        done = {
            self.target_name(step.node)
            for step in run.steps
            if step.kind == StepKind.FORWARD and step.state in _DONE_STEP_STATES
        }
        problems = []
        for name in sorted(ahead):
            for need in self.target.nodes_by_name[name].needs:
                if need not in done and need not in ahead:
                    problems.append(
                        f"{self.target}'s {name!r} needs the result of {need!r}, which this run "
                        "has not got and will not reach"
                    )
        return problems


def plan_migration(
    *, source: Workflow, target: Workflow, renames: Mapping[str, str] | None = None
) -> MigrationPlan:
    """Return the plan moving runs of `source` to `target`, or raise InvalidMigration
    naming every problem with it (a rename of an unknown node, two nodes becoming one)."""
    renames = dict(renames or {})
    problems = []
    if source.name != target.name:
        problems.append(f"{source} and {target} are different workflow types")
    if source.version == target.version:
        problems.append(f"the runs are on {source} already: choose another version to move to")
    for old, new in renames.items():
        if old not in source.nodes_by_name:
            problems.append(f"rename {old}={new}: {source} has no node {old!r}")
        if new not in target.nodes_by_name:
            problems.append(f"rename {old}={new}: {target} has no node {new!r}")
        elif new != old and new in source.nodes_by_name:
            problems.append(
                f"rename {old}={new}: {source} has a node {new!r} of its own; a swap or a chain "
                "of names cannot be done in one move (go through a version in between)"
            )
    targets: dict[str, list[str]] = {}
    for old, new in renames.items():
        targets.setdefault(new, []).append(old)
    for new, olds in sorted(targets.items()):
        if len(olds) > 1:
            problems.append(f"{' and '.join(map(repr, sorted(olds)))} are all renamed to {new!r}")
    if problems:
        raise InvalidMigration(problems)
    return MigrationPlan(source=source, target=target, renames=renames)


def parse_renames(pairs: Iterable[str]) -> dict[str, str]:
    """Read `old=new` pairs (the command line's `--rename`); raise InvalidMigration on others."""
    renames: dict[str, str] = {}
    problems = []
    for pair in pairs:
        old, sep, new = pair.partition("=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            problems.append(f"rename {pair!r} is not of the form old=new")
        elif old in renames and renames[old] != new:
            problems.append(f"{old!r} is renamed twice: to {renames[old]!r} and to {new!r}")
        else:
            renames[old] = new
    if problems:
        raise InvalidMigration(problems)
    return renames


def _is_live_forward(step: StepAt) -> bool:
    return step.kind == StepKind.FORWARD and step.state in LIVE_STEP_STATES


def _undoable(node: Node | None) -> bool:
    return isinstance(node, Activity) and node.mutating and node.compensation is not None


def _required(workflow: Workflow, join: str) -> int | None:
    node = workflow.nodes_by_name.get(join)
    if not isinstance(node, Join) or join not in workflow.branch_count:
        return None
    return node.required(workflow.branch_count[join])


def _kind(node: Node) -> str:
    return type(node).__name__


def _reachable(workflow: Workflow, starts: Iterable[str]) -> set[str]:
    """Every node a run at `starts` may still enter, the starts included (loops too)."""
    seen: set[str] = set()
    pending = [name for name in starts if name in workflow.nodes_by_name]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(
            successor
            for successor in workflow.nodes_by_name[name].successors()
            if successor in workflow.nodes_by_name
        )
    return seen
