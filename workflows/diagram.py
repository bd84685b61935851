"""A picture of a definition with a run's position on it: a layered layout, drawn as SVG.

Nodes sit in columns by their longest distance from the start (the graph is
acyclic), so every arrow points right; each box carries its step's state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.utils.translation import gettext, ngettext, pgettext, pgettext_lazy

from workflows.dsl import (
    Activity,
    Map,
    Node,
    UserTask,
    Workflow,
    forward_successors,
    node_words,
)
from workflows.models import StepRun
from workflows.states import LIVE_STEP_STATES, StepKind, StepState

BOX_WIDTH, BOX_HEIGHT, GAP_X, GAP_Y, MARGIN = 150, 44, 40, 18, 10
UNDOING = "undoing"
UNDO_FAILED = "undo failed"
# What a box's state and kind are called in its tooltip, in the reader's language (the
# codes stay in `state` and `kind`, which the template colours by).
_STATE_WORDS = {
    StepState.SCHEDULED: pgettext_lazy("step state", "scheduled"),
    StepState.RUNNING: pgettext_lazy("step state", "running"),
    StepState.RETRY_WAIT: pgettext_lazy("step state", "waiting to retry"),
    StepState.WAITING: pgettext_lazy("step state", "waiting"),
    StepState.SUCCEEDED: pgettext_lazy("step state", "succeeded"),
    StepState.FAILED: pgettext_lazy("step state", "failed"),
    StepState.COMPENSATED: pgettext_lazy("step state", "undone"),
    StepState.CANCELLED: pgettext_lazy("step state", "cancelled"),
    StepState.SKIPPED: pgettext_lazy("step state", "skipped"),
    UNDOING: pgettext_lazy("step state", "being undone"),
    UNDO_FAILED: pgettext_lazy("step state", "undo failed"),
}
_KIND_WORDS = {
    "activity": pgettext_lazy("node kind", "activity"),
    "approval": pgettext_lazy("node kind", "approval"),
    "usertask": pgettext_lazy("node kind", "form to fill in"),
    "revise": pgettext_lazy("node kind", "changes by the requester"),
    "branch": pgettext_lazy("node kind", "branch"),
    "parallel": pgettext_lazy("node kind", "parallel"),
    "join": pgettext_lazy("node kind", "join"),
    "sleep": pgettext_lazy("node kind", "timer"),
    "waitforsignal": pgettext_lazy("node kind", "wait for a signal"),
    "goback": pgettext_lazy("node kind", "go back"),
    "childworkflow": pgettext_lazy("node kind", "child workflow"),
    "map": pgettext_lazy("node kind", "map"),
}


@dataclass(frozen=True)
class Box:
    name: str
    # The node as people read it, in their language (workflows.dsl.node_words).
    label: str
    kind: str
    x: int
    y: int
    state: str
    current: bool
    width: int = BOX_WIDTH
    height: int = BOX_HEIGHT
    # An activity's queue and limits, in a small line under its name ("" for none).
    note: str = ""

    @property
    def state_words(self) -> str:
        """The state in the reader's words ("wartend"); a state with no entry as it is."""
        return str(_STATE_WORDS.get(self.state, self.state))

    @property
    def kind_words(self) -> str:
        """The node's kind in the reader's words ("Genehmigung")."""
        return str(_KIND_WORDS.get(self.kind, self.kind))

    @property
    def label_x(self) -> int:
        return self.x + self.width // 2

    @property
    def label_y(self) -> int:
        return self.y + self.height // 2

    @property
    def name_y(self) -> int:
        """Where the name sits: in the middle, or a little higher above a note."""
        return self.label_y - 6 if self.note else self.label_y

    @property
    def note_y(self) -> int:
        return self.label_y + 10


@dataclass(frozen=True)
class Arrow:
    x1: int
    y1: int
    x2: int
    y2: int
    # A catch path (Activity.on_error) is drawn dashed, labelled with the error types
    # it catches; a run deadline's path, from the start, with "deadline".
    label: str = ""
    dashed: bool = False

    @property
    def label_x(self) -> int:
        return (self.x1 + self.x2) // 2

    @property
    def label_y(self) -> int:
        return (self.y1 + self.y2) // 2 - 4


@dataclass(frozen=True)
class Diagram:
    boxes: list[Box]
    arrows: list[Arrow]
    width: int
    height: int


def draw(definition: Workflow, steps: Iterable[StepRun]) -> Diagram:
    """Lay out `definition`, marking each node with the state of its step in `steps`
    (or of its undo, while it runs or once it failed)."""
    by_round = sorted(steps, key=lambda step: step.round)
    # A node run in several rounds of a loop shows its latest round.
    states: dict[str, str] = {
        step.node: step.state for step in by_round if step.kind == StepKind.FORWARD
    }
    # An undo in flight, or one that failed for good (the run is dead-lettered), shows on
    # the node it undoes: that is where an operator must look.
    for step in by_round:
        if step.kind == StepKind.COMPENSATION and step.state in LIVE_STEP_STATES:
            states[step.node] = UNDOING
        elif step.kind == StepKind.COMPENSATION and step.state == StepState.FAILED:
            states[step.node] = UNDO_FAILED
    depth = _depths(definition)
    columns: dict[int, list[str]] = {}
    for node in definition.nodes:
        columns.setdefault(depth.get(node.name, 0), []).append(node.name)
    boxes: dict[str, Box] = {}
    for column, names in columns.items():
        for row, name in enumerate(names):
            state = states.get(name, "")
            boxes[name] = Box(
                name=name,
                label=node_words(definition, name),
                kind=type(definition.node(name)).__name__.lower(),
                x=MARGIN + column * (BOX_WIDTH + GAP_X),
                y=MARGIN + row * (BOX_HEIGHT + GAP_Y),
                state=str(state),
                current=state in LIVE_STEP_STATES or state == UNDOING,
                note=node_note(definition.node(name)),
            )
    arrows = [
        _arrow(boxes[node.name], boxes[successor], label, dashed=bool(label))
        for node in definition.nodes
        for successor, label in _edges(node)
        if successor in boxes
    ]
    deadline_node = definition.deadline_node
    if deadline_node in boxes and definition.start in boxes:
        arrows.append(
            _arrow(
                boxes[definition.start],
                boxes[deadline_node],
                pgettext("diagram arrow", "deadline"),
                dashed=True,
            )
        )
    width = MARGIN * 2 + (max(columns, default=0) + 1) * (BOX_WIDTH + GAP_X) - GAP_X
    tallest = max((len(names) for names in columns.values()), default=1)
    height = MARGIN * 2 + tallest * (BOX_HEIGHT + GAP_Y) - GAP_Y
    return Diagram(boxes=list(boxes.values()), arrows=arrows, width=width, height=height)


def node_note(node: Node) -> str:
    """The small line under a box's name: an activity's queue and limits, or what a user
    task asks a person to fill in ("fill in: BankDetails"); "" for other nodes."""
    if isinstance(node, UserTask):
        form = getattr(node.form, "__name__", None) or gettext("a form")
        return gettext("fill in: %(form)s") % {"form": form}
    return limits_note(node)


def limits_note(node: Node) -> str:
    """Say an activity's (or a map's) queue and limits in few words: "payments · 50/m ·
    5 at once"; "" when it has none."""
    if not isinstance(node, Activity | Map):
        return ""
    parts = []
    if node.queue:
        parts.append(node.queue)
    if node.rate_limit:
        parts.append(node.rate_limit)
    if node.concurrency is not None:
        parts.append(
            ngettext("%(count)s at once", "%(count)s at once", node.concurrency)
            % {"count": node.concurrency}
        )
    return " · ".join(parts)


def _arrow(source: Box, target: Box, label: str, *, dashed: bool) -> Arrow:
    return Arrow(
        x1=source.x + BOX_WIDTH,
        y1=source.label_y,
        x2=target.x,
        y2=target.label_y,
        label=label,
        dashed=dashed,
    )


def _edges(node: Node) -> list[tuple[str, str]]:
    """Where `node` leads, each with its label: the error types of a catch path, or ""."""
    if not isinstance(node, Activity) or not node.on_error:
        return [(successor, "") for successor in node.successors()]
    edges = [(node.next, "")] if node.next is not None else []
    caught: dict[str, list[str]] = {}
    for error_type, target in node.on_error.items():
        caught.setdefault(target, []).append(error_type)
    return edges + [(target, ", ".join(types)) for target, types in caught.items()]


def _depths(definition: Workflow) -> dict[str, int]:
    """Return each node's longest distance from the start (a GoBack's back edge aside)."""
    depth = {definition.start: 0}
    if definition.deadline_node is not None:
        # The deadline path starts beside the start: it may begin anywhere along the way.
        depth[definition.deadline_node] = 1
    order = _topological(definition)
    for name in order:
        for successor in forward_successors(definition.node(name)):
            if name in depth:
                depth[successor] = max(depth.get(successor, 0), depth[name] + 1)
    return depth


def _topological(definition: Workflow) -> list[str]:
    incoming = {node.name: 0 for node in definition.nodes}
    for node in definition.nodes:
        for successor in forward_successors(node):
            incoming[successor] = incoming.get(successor, 0) + 1
    ready = [name for name, count in incoming.items() if count == 0]
    order = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for successor in forward_successors(definition.node(name)):
            incoming[successor] -= 1
            if incoming[successor] == 0:
                ready.append(successor)
    return order
