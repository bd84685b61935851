"""A run's step results by node, read from the step rows themselves.

Each finished step keeps its result on its own row, so recording step 10,000 of a
run costs what recording step 10 does: nothing rewrites a document that grows
with the run. Reading one result is one indexed query (the unique key on run,
node, kind and round), remembered for the life of the mapping. A node run in
several rounds of a loop shows its latest round's result; earlier rounds keep
theirs on their own rows (`of_round`).

The rows are read through the manager it is given (`StepRun.objects`, handed in by
`WorkflowRun.results`), so this module needs nothing from `workflows.models`, which
builds on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from workflows.states import StepKind, StepState

if TYPE_CHECKING:
    from django.db.models import Manager, QuerySet

_MISSING = object()
# A step's result stays part of the run's data after the step is undone; a step an
# operator skipped has the result they gave it.
RESULT_STEP_STATES = (StepState.SUCCEEDED, StepState.COMPENSATED, StepState.SKIPPED)


class RunResults(Mapping[str, Any]):
    """The results of a run's finished forward steps, by node name (lazy, read-only)."""

    def __init__(self, run_id: Any, *, steps: Manager[Any]) -> None:
        self._run_id = run_id
        self._step_rows = steps
        self._known: dict[str, Any] = {}
        self._complete = False

    def _steps(self) -> QuerySet[Any]:
        # A map's items keep their results on their own rows; its node's result lists them.
        return self._step_rows.filter(
            run_id=self._run_id,
            kind=StepKind.FORWARD,
            state__in=RESULT_STEP_STATES,
            item__isnull=True,
        )

    def _lookup(self, node: str) -> Any:
        if node not in self._known and not self._complete:
            found = (
                self._steps()
                .filter(node=node)
                .order_by("-round")
                .values_list("result", flat=True)[:1]
            )
            self._known[node] = found[0] if found else _MISSING
        return self._known.get(node, _MISSING)

    def _load_all(self) -> None:
        if not self._complete:
            # A later round of a node comes later, so its result is the one kept.
            self._known = dict(self._steps().order_by("round", "id").values_list("node", "result"))
            self._complete = True

    def of_round(self, node: str, round: int, item: int | None = None) -> Any:
        """Return the result of `node` in `round` (of a map's `item`, if given; None if it
        has none): what an undo undoes."""
        steps = self._step_rows.filter(
            run_id=self._run_id, kind=StepKind.FORWARD, state__in=RESULT_STEP_STATES
        )
        found = steps.filter(node=node, round=round, item=item).values_list("result", flat=True)[:1]
        return found[0] if found else None

    def __getitem__(self, node: str) -> Any:
        value = self._lookup(node)
        if value is _MISSING:
            raise KeyError(node)
        return value

    def __contains__(self, node: object) -> bool:
        return isinstance(node, str) and self._lookup(node) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        self._load_all()
        return iter(self._known)

    def __len__(self) -> int:
        self._load_all()
        return len(self._known)

    def __repr__(self) -> str:
        return f"RunResults({self._run_id})"
