"""Links into the console's lists, filtered: each number on the SLA dashboard opens
the tasks behind it."""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.urls import reverse

register = template.Library()


@register.simple_tag
def task_list_url(*, by: str = "", name: str = "", **filters: str) -> str:
    """Return the console's task list's address filtered by `filters` (empty ones left
    out) and, when `by` names a filter (type, group, person), by `name` for it:
    `{% task_list_url state="open" by="group" name=row.name sla="overdue" %}`."""
    query = {key: str(value) for key, value in filters.items() if value}
    if by:
        query[by] = name
    return f"{reverse('console:tasks')}?{urlencode(query)}"
