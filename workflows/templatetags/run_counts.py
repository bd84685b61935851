"""How many runs wait for an operator, for the admin's index page."""

from __future__ import annotations

from django import template
from django.db.models import Count, Q

from workflows.models import WorkflowRun
from workflows.states import RunState

register = template.Library()

NEEDING_AN_OPERATOR = (RunState.DEAD_LETTERED, RunState.FAILED, RunState.PAUSED)


@register.simple_tag
def runs_needing_an_operator() -> dict[str, int]:
    """Count dead-lettered, failed and paused runs in one query (run_state_created_idx)."""
    return WorkflowRun.objects.filter(state__in=NEEDING_AN_OPERATOR).aggregate(
        **{state: Count("pk", filter=Q(state=state)) for state in NEEDING_AN_OPERATOR}
    )
