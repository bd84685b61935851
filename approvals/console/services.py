"""What an operator does to a run from the console: retry, resume, skip, cancel, pause.

Each use case is one transaction: check that the person is an operator, lock the
run, make one call into `workflows.engine` (which guards the run's state), and
append an audit entry naming the operator, their reason and the change of state
(chained, see approvals.audit). A refusal changes nothing and says why, with the
status the console answers: 403 for someone who is not an operator, 409 for an
action that does not fit the run's state, 422 for a result that is not JSON.
Asking twice for a pause or a cancellation is a no-op, audited once.

Which actions the console offers for a state is `actions_for`; the engine's
guards stay the rule, and a test holds the offer to them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils.translation import gettext_lazy as _

from approvals import audit, permissions
from approvals.act import Act
from approvals.models import COMMENT_MAX_LENGTH, GroupManager
from workflows import engine, registry
from workflows.cleaning import Refused, clean_text, refuse_unstorable
from workflows.dsl import Activity
from workflows.engine.operate import SKIPPABLE_STEP_STATES
from workflows.models import StepRun, WorkflowRun
from workflows.registry import UnknownWorkflow
from workflows.states import RunState, StepKind
from workflows.versions import InvalidMigration

# The channel audit entries name for what operators do here.
CHANNEL = "console"
# A skipped step's result is a row's JSON, not a document: keep it small.
RESULT_MAX_BYTES = 64 * 1024


class ConsoleError(Exception):
    status = 400


class RunMissing(ConsoleError):
    status = 404

    def __init__(self) -> None:
        super().__init__("There is no such run.")


class NotOperator(ConsoleError):
    status = 403


class NotPossibleNow(ConsoleError):
    status = 409


class InvalidInput(ConsoleError):
    status = 422


class UnknownVersion(ConsoleError):
    status = 404


# ---------------------------------------------------------------------------
# Who may
# ---------------------------------------------------------------------------


def console_refusal(user: Any) -> str:
    """Return why `user` may not open the console, or ""."""
    return permissions.console_refusal(
        is_staff=bool(user.is_staff),
        may_view_runs=user.has_perm("workflows.view_workflowrun"),
        may_operate_runs=user.has_perm("workflows.operate_workflowrun"),
    )


def task_overview_scope(user: Any, *, page: str) -> tuple[frozenset[int] | None, str]:
    """Return the groups whose tasks `user` may see on `page`, an overview of human tasks
    (None: all), and why they may not see it at all, or ""."""
    refusal = console_refusal(user)
    # An operator sees everything: which groups they manage does not matter.
    managed = (
        frozenset(GroupManager.objects.filter(manager=user).values_list("group_id", flat=True))
        if refusal
        else frozenset()
    )
    return permissions.task_overview_scope(
        console_refusal=refusal, managed_group_ids=managed, page=page
    )


def operate_refusal(user: Any, what: str) -> str:
    """Return why `user` may not `what`, or ""."""
    return permissions.operate_refusal(
        may_operate_runs=user.has_perm("workflows.operate_workflowrun"), what=what
    )


# ---------------------------------------------------------------------------
# The actions
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One thing an operator may do to a whole run, and how the console offers it."""

    name: str
    label: str
    # Completes "Only operators may …".
    what: str
    # What the operator is asked to confirm.
    explain: str
    done: str
    offered_in: tuple[str, ...]
    danger: bool = False


ACTIONS: dict[str, Action] = {
    action.name: action
    for action in (
        Action(
            name="retry",
            label=_("Retry the failed undo"),
            what=_("retry a dead-lettered run"),
            explain=_("Try its failed compensation again, with a fresh attempt budget."),
            done=_("Retrying its failed compensation."),
            offered_in=(RunState.DEAD_LETTERED,),
        ),
        Action(
            name="resume-past",
            label=_("Resume past the failed undo"),
            what=_("resume a dead-lettered run"),
            explain=_(
                "You undid the failed step's effect by hand: mark it undone and undo the rest."
            ),
            done=_("Resumed past its failed compensation."),
            offered_in=(RunState.DEAD_LETTERED,),
            danger=True,
        ),
        Action(
            name="retry-failed",
            label=_("Retry from the failed step"),
            what=_("retry a failed run"),
            explain=_(
                "Run its failed step again, with a fresh attempt budget, and go on from there."
            ),
            done=_("Retrying from its failed step."),
            offered_in=(RunState.FAILED,),
        ),
        Action(
            name="pause",
            label=_("Pause"),
            what=_("pause a run"),
            explain=_("Start no new step until it is resumed; steps already running finish."),
            done=_("Paused."),
            offered_in=(RunState.RUNNING, RunState.WAITING),
        ),
        Action(
            name="resume",
            label=_("Resume"),
            what=_("resume a run"),
            explain=_("Let it go on, re-sending the steps it held back."),
            done=_("Resumed."),
            offered_in=(RunState.PAUSED,),
        ),
        Action(
            name="cancel",
            label=_("Cancel"),
            what=_("cancel a run"),
            explain=_(
                "Start nothing new, close its open tasks and undo its completed steps "
                "in reverse order."
            ),
            done=_("Cancelling: its completed steps are being undone."),
            offered_in=(RunState.PENDING, RunState.RUNNING, RunState.WAITING, RunState.PAUSED),
            danger=True,
        ),
    )
}
SKIP_WHAT = _("skip a step")
MOVE_WHAT = _("move a run")
# The audit entry's event for each engine use case an operator calls, whatever the
# channel (the console here, the API and the admin through workflows.operating).
EVENTS = {
    "retry_dead_letter": "run_retried",
    "resume_dead_letter": "run_resumed_past_failure",
    "retry_failed_run": "run_retried",
    "pause_run": "run_paused",
    "resume_run": "run_resumed",
    "cancel_run": "run_cancelled",
    "skip_step": "step_skipped",
    "move_run": "run_moved",
    "migrate_runs": "run_migrated",
}


def actions_for(run: WorkflowRun) -> list[Action]:
    """The actions the console offers for `run` in its state."""
    return [action for action in ACTIONS.values() if run.state in action.offered_in]


def skippable_steps(run: WorkflowRun, steps: list[StepRun]) -> list[StepRun]:
    """The steps of `run` an operator may give a result by hand (see engine.skip_step)."""
    if run.state not in (RunState.RUNNING, RunState.WAITING, RunState.PAUSED, RunState.FAILED):
        return []
    try:
        definition = registry.get(run.workflow_type, run.workflow_version)
    except UnknownWorkflow:
        return []
    return [
        step
        for step in steps
        if step.kind == StepKind.FORWARD
        and step.state in SKIPPABLE_STEP_STATES
        and isinstance(definition.nodes_by_name.get(step.node), Activity)
    ]


@dataclass(frozen=True)
class Done:
    run: WorkflowRun
    # False when the run already was where the action leads (a second pause).
    changed: bool


def retry_dead_letter(*, run_id: UUID, act: Act) -> Done:
    """Retry a dead-lettered run's failed compensation."""
    return _operate(ACTIONS["retry"], engine.retry_dead_letter, run_id=run_id, act=act)


def resume_dead_letter(*, run_id: UUID, act: Act) -> Done:
    """Move a dead-lettered run past its failed compensation (undone by hand)."""
    return _operate(ACTIONS["resume-past"], engine.resume_dead_letter, run_id=run_id, act=act)


def retry_failed_run(*, run_id: UUID, act: Act) -> Done:
    """Send a failed run (nothing undone) back to its failed step."""
    return _operate(ACTIONS["retry-failed"], engine.retry_failed_run, run_id=run_id, act=act)


def pause_run(*, run_id: UUID, act: Act) -> Done:
    """Pause a running or waiting run."""
    return _operate(ACTIONS["pause"], engine.pause_run, run_id=run_id, act=act)


def resume_run(*, run_id: UUID, act: Act) -> Done:
    """Resume a paused run."""
    return _operate(ACTIONS["resume"], engine.resume_run, run_id=run_id, act=act)


def cancel_run(*, run_id: UUID, act: Act) -> Done:
    """Cancel a live run: its completed steps are undone."""
    return _operate(ACTIONS["cancel"], engine.cancel_run, run_id=run_id, act=act)


# The use case behind each action's name, for the console's one action view.
USE_CASES: dict[str, Callable[..., Done]] = {
    "retry": retry_dead_letter,
    "resume-past": resume_dead_letter,
    "retry-failed": retry_failed_run,
    "pause": pause_run,
    "resume": resume_run,
    "cancel": cancel_run,
}


# At most a page of runs at a time.
BULK_MAX = 100


def retry_dead_letters(*, run_ids: list[UUID], act: Act) -> dict[UUID, Done | ConsoleError]:
    """Retry each dead letter in its own transaction (one refusal stops none of the
    others); return what became of each run, its Done or its refusal."""
    refusal = operate_refusal(act.user, ACTIONS["retry"].what)
    if refusal:
        raise NotOperator(refusal)
    if len(run_ids) > BULK_MAX:
        raise InvalidInput(
            _("Retry at most %(most)s runs at a time (you chose %(count)s).")
            % {"most": BULK_MAX, "count": len(run_ids)}
        )
    outcomes: dict[UUID, Done | ConsoleError] = {}
    for run_id in dict.fromkeys(run_ids):
        try:
            outcomes[run_id] = retry_dead_letter(run_id=run_id, act=act)
        except ConsoleError as error:
            outcomes[run_id] = error
    return outcomes


def skip_step(*, run_id: UUID, node: str, result: str, act: Act) -> Done:
    """Give a stuck step of a run the result `result` (JSON text) and go on from it."""
    refusal = operate_refusal(act.user, SKIP_WHAT)
    if refusal:
        raise NotOperator(refusal)
    value = parse_result(result)
    reason = _reason(act.reason)
    with transaction.atomic():
        before = _lock(run_id).state
        try:
            run = engine.skip_step(run_id=run_id, node=node, result=value, now=act.now)
        except engine.EngineError as error:
            raise NotPossibleNow(str(error)) from None
        record_run_action(
            run=run,
            actor=act.user,
            action="skip_step",
            state_before=before,
            channel=act.channel,
            remote_addr=act.remote_addr,
            now=act.now,
            comment=reason,
            changes={"step": node, "result": value},
        )
    return Done(run=run, changed=True)


def move_run(*, run_id: UUID, node: str, act: Act) -> Done:
    """Move a live run to `node`: what is in flight is cancelled, the node entered in a new
    round (engine.move_run). An operator says why; the reason goes to the audit trail."""
    refusal = operate_refusal(act.user, MOVE_WHAT)
    if refusal:
        raise NotOperator(refusal)
    reason = _reason(act.reason)
    if not reason:
        raise InvalidInput(_("Say why you move the run: the reason is kept in its audit trail."))
    with transaction.atomic():
        before = _lock(run_id).state
        try:
            run = engine.move_run(run_id=run_id, to_node=node, now=act.now)
        except engine.EngineError as error:
            raise NotPossibleNow(str(error)) from None
        record_run_action(
            run=run,
            actor=act.user,
            action="move_run",
            state_before=before,
            channel=act.channel,
            remote_addr=act.remote_addr,
            now=act.now,
            comment=reason,
            changes={"to": node},
        )
    return Done(run=run, changed=True)


def movable_nodes(run: WorkflowRun) -> list[str]:
    """The nodes the console offers to move `run` to: none unless it may move now."""
    if run.state not in engine.MOVABLE_RUN_STATES:
        return []
    return engine.movable_nodes(registry.get(run.workflow_type, run.workflow_version))


def parse_result(text: str) -> Any:
    """Read the operator's result for a skipped step: JSON PostgreSQL can store, or a
    refusal that says what is wrong and where."""
    if not text.strip():
        raise InvalidInput(_("Give the step's result as JSON (write null for none)."))
    if len(text.encode()) > RESULT_MAX_BYTES:
        raise InvalidInput(
            _("The result must be at most %(size)s KiB of JSON.")
            % {"size": RESULT_MAX_BYTES // 1024}
        )

    def no_constants(name: str) -> Any:
        raise InvalidInput(
            _("The result is not JSON: %(name)s is not a JSON number.") % {"name": name}
        )

    try:
        value = json.loads(text, parse_constant=no_constants)
        refuse_unstorable(value)
    except json.JSONDecodeError as error:
        raise InvalidInput(
            _("The result is not JSON: %(error)s (line %(line)s, column %(column)s).")
            % {"error": error.msg, "line": error.lineno, "column": error.colno}
        ) from None
    except Refused as error:
        raise InvalidInput(
            _("The result cannot be stored: %(error)s.") % {"error": error}
        ) from None
    return value


def _operate(
    action: Action, use_case: Callable[..., WorkflowRun], *, run_id: UUID, act: Act
) -> Done:
    refusal = operate_refusal(act.user, action.what)
    if refusal:
        raise NotOperator(refusal)
    reason = _reason(act.reason)
    with transaction.atomic():
        before = _lock(run_id).state
        try:
            run = use_case(run_id=run_id, now=act.now)
        except engine.EngineError as error:
            raise NotPossibleNow(str(error)) from None
        if run.state == before:
            return Done(run=run, changed=False)
        record_run_action(
            run=run,
            actor=act.user,
            action=use_case.__name__,
            state_before=before,
            channel=act.channel,
            remote_addr=act.remote_addr,
            now=act.now,
            comment=reason,
        )
    return Done(run=run, changed=True)


def record_run_action(
    *,
    run: WorkflowRun,
    actor: Any,
    action: str,
    state_before: str,
    channel: str,
    remote_addr: str | None,
    now: datetime,
    comment: str = "",
    changes: dict[str, Any] | None = None,
) -> None:
    """Audit that `actor` took `action` (an engine use case's name) on `run` by hand: the
    one writer of these entries, for the console and, as the run-action hook of
    workflows.operating, for the API and the admin. Call inside the action's transaction."""
    audit.record(
        task=run,
        event=EVENTS.get(action, action),
        actor=actor,
        channel=channel,
        now=now,
        comment=comment,
        remote_addr=remote_addr,
        changes={"state": [state_before, run.state], **(changes or {})},
    )


def _lock(run_id: UUID) -> WorkflowRun:
    """Lock the run first (the engine's lock order), so its state before the action holds."""
    run = WorkflowRun.objects.select_for_update().filter(pk=run_id).first()
    if run is None:
        raise RunMissing()
    return run


def _reason(text: str) -> str:
    try:
        return clean_text(text.strip(), max_length=COMMENT_MAX_LENGTH, multiline=True)
    except Refused as error:
        raise InvalidInput(_("The reason %(error)s.") % {"error": error}) from None


# ---------------------------------------------------------------------------
# Moving live runs to another version
# ---------------------------------------------------------------------------

MIGRATE_WHAT = _("move runs to another version")


def parse_renames(text: str) -> dict[str, str]:
    """Read renames written one per line as `old=new` (blank lines ignored); refuse,
    naming the line, any other shape."""
    renames: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        old, equals, new = (part.strip() for part in line.partition("="))
        if not equals or not old or not new:
            raise InvalidInput(
                _(
                    "Line %(number)s of the renames, %(line)s, is not old=new "
                    "(a node of the old version, then the node it becomes)."
                )
                % {"number": number, "line": repr(line)}
            )
        if old in renames:
            raise InvalidInput(
                _("Line %(number)s renames %(node)s a second time.")
                % {"number": number, "node": repr(old)}
            )
        renames[old] = new
    return renames


def migrate_runs(
    *,
    workflow_type: str,
    from_version: int,
    to_version: int,
    renames: dict[str, str],
    apply: bool,
    act: Act,
) -> engine.MigrationReport:
    """Preview (anyone who may open the console) or apply (operators, with a reason
    kept in the audit trail) the move of `workflow_type`'s live runs between versions."""
    plan = {
        "workflow_type": workflow_type,
        "from_version": from_version,
        "to_version": to_version,
        "renames": renames,
    }
    try:
        if not apply:
            return engine.preview_migration(**plan)
        if refusal := operate_refusal(act.user, MIGRATE_WHAT):
            raise NotOperator(refusal)
        if not act.reason.strip():
            raise InvalidInput(
                _("Say why you move these runs: the reason goes into the audit trail.")
            )
        return engine.migrate_runs(
            **plan,
            actor=act.user,
            channel=act.channel,
            remote_addr=act.remote_addr,
            comment=_reason(act.reason),
        )
    except UnknownWorkflow as error:
        raise UnknownVersion(str(error)) from None
    except InvalidMigration as error:
        raise InvalidInput(
            _("The plan cannot be followed: %(problems)s") % {"problems": "; ".join(error.problems)}
        ) from None
