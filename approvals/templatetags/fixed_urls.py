"""Addresses that take no arguments, reversed once per URL configuration and script prefix.

`{% url %}` reverses on every render: the inbox page's fourteen links (the header's
and its forms') were a fifth of its template's time, for text that changes only with
the URL configuration and the prefix the site is served under. `{% fixed_url name %}`
prints what `{% url name %}` would.
"""

from __future__ import annotations

import functools
from typing import Any

from django import template
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import get_script_prefix, get_urlconf, reverse

register = template.Library()


@register.simple_tag
def fixed_url(name: str) -> str:
    """Return `reverse(name)`, reversed once for the current URL configuration and prefix."""
    return _reversed(name, get_urlconf(), get_script_prefix())


@functools.lru_cache(maxsize=256)
def _reversed(name: str, urlconf: Any, prefix: str) -> str:
    # The prefix is the current one: it is in the key because reverse() reads it.
    return reverse(name, urlconf=urlconf)


@receiver(setting_changed)
def _forget(**kwargs: Any) -> None:
    """Settings change in tests only, and ROOT_URLCONF changes every address."""
    _reversed.cache_clear()
