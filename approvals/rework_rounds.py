"""How many times an approval may still send its request back for changes.

An approval that allows "request changes" leads to a `Revise` node, whose
resubmission goes back to the approval through a `GoBack` bounded by its
`max_rounds`. Asking for changes when the loop has no round left would make the
requester redo their request only to have it end on the GoBack's `otherwise`
path; so the reviewer is told before, and offered approve or reject alone. The
rounds are the GoBack's own steps in the run, as the engine counts them.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from workflows.dsl import Approval, GoBack, Revise, Workflow
from workflows.models import WorkflowRun
from workflows.states import StepKind


def loop_of(definition: Workflow, node: Approval) -> GoBack | None:
    """Return the GoBack that brings `node`'s requests for changes back to it, if the
    definition has the usual shape (approval → Revise → GoBack to the approval)."""
    revise = definition.nodes_by_name.get(node.on_changes_requested or "")
    if not isinstance(revise, Revise) or revise.next is None:
        return None
    go_back = definition.nodes_by_name.get(revise.next)
    if isinstance(go_back, GoBack) and go_back.to == node.name:
        return go_back
    return None


def rounds_left(*, run: WorkflowRun, definition: Workflow, node: Approval) -> int | None:
    """Return how many more times `node` may send `run` back (None: the definition does
    not say, its loop being shaped otherwise)."""
    go_back = loop_of(definition, node)
    if go_back is None or go_back.max_rounds is None:
        return None
    went_back = run.steps.filter(node=go_back.name, kind=StepKind.FORWARD).count()
    return max(go_back.max_rounds - 1 - went_back, 0)


def why_no_changes(*, run: WorkflowRun, definition: Workflow, node: Approval) -> str:
    """Return why `node` may not send `run` back for changes now, or "" if it may."""
    if not node.may_request_changes:
        return _("This approval cannot send the request back for changes: approve or reject it.")
    left = rounds_left(run=run, definition=definition, node=node)
    if left == 0:
        go_back = loop_of(definition, node)
        assert go_back is not None
        assert go_back.max_rounds is not None
        times = go_back.max_rounds - 1
        return ngettext(
            "This request was already sent back for changes %(times)d time, the most this"
            " approval allows: approve or reject it.",
            "This request was already sent back for changes %(times)d times, the most this"
            " approval allows: approve or reject it.",
            times,
        ) % {"times": times}
    return ""
