"""Each request speaks its reader's language and shows their time zone.

Django's LocaleMiddleware picks a language from the browser's Accept-Language; this
middleware, after authentication, applies the signed-in person's own choice, which
approvals.preferences keeps in their session (so no page pays a query for it). An API
caller with a token has no session: `activate_for_token` applies their stored choice
unless they sent Accept-Language, which a script asks with on purpose.
"""

from __future__ import annotations

import contextlib
import zoneinfo
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation

from approvals import preferences


class PersonalLocaleMiddleware:
    """Activate the signed-in person's language and time zone for their request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            chosen = _chosen_in_session(request)
        except (OperationalError, InterfaceError):
            # The session cannot be read while the database is down: the view meets the
            # same error and config.outages answers 503, in the browser's language.
            chosen = None
        if chosen is not None:
            activate(request, chosen)
        try:
            response = self.get_response(request)
            # Said here, as the language is put back below (LocaleMiddleware, outside this
            # one, only sets the header when it is missing).
            response.headers.setdefault("Content-Language", translation.get_language())
            return response
        finally:
            # Neither the language nor the time zone outlives the request: work done
            # afterwards in this thread (a test's next call, an eager task) is in the
            # site's defaults, not in the last reader's.
            timezone.deactivate()
            translation.deactivate()


def _chosen_in_session(request: HttpRequest) -> preferences.Chosen | None:
    session = getattr(request, "session", None)
    if session is None or not request.user.is_authenticated:
        return None
    return preferences.Chosen(
        language=session.get(preferences.SESSION_LANGUAGE, ""),
        time_zone=session.get(preferences.SESSION_TIME_ZONE, ""),
    )


def activate(request: HttpRequest, chosen: preferences.Chosen) -> None:
    """Apply a choice to this request; a blank (or no longer offered) part stays as is."""
    if chosen.language and chosen.language in dict(preferences.languages()):
        translation.activate(chosen.language)
        request.LANGUAGE_CODE = chosen.language
    if chosen.time_zone:
        # A zone this machine's tz database no longer has: the site's, rather than a 500.
        with contextlib.suppress(zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo(chosen.time_zone))


def activate_for_token(request: HttpRequest, user: Any) -> None:
    """Apply a token caller's stored choice; their Accept-Language, if sent, wins."""
    chosen = preferences.chosen_by(user)
    if request.headers.get("Accept-Language"):
        chosen = preferences.Chosen(time_zone=chosen.time_zone)
    activate(request, chosen)
