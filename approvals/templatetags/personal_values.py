"""`{{ value|audited_value }}`: a value of an audit entry as a reader should see it, a
personal value's keyed digest (workflows.personal) said in words rather than shown."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.translation import gettext

from workflows import personal

register = template.Library()


@register.filter
def audited_value(value: Any) -> Any:
    """Return "(personal, kept as a keyed digest)" for a digest, else `value` as it is."""
    if isinstance(value, dict) and personal.DIGEST in value:
        return gettext("(personal, kept as a keyed digest)")
    return value
