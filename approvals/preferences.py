"""A person's language and time zone: the choices, reading and saving them.

The choice is kept in a `Preferences` row and, so that no page pays a query for it,
copied into the person's session when they sign in and when they save it
(config.locale applies it to each request). A blank language follows the browser's
Accept-Language; a blank time zone is the site's (BATON_TIME_ZONE).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from approvals.models import Preferences

# The session keys config.locale reads.
SESSION_LANGUAGE = "baton_language"
SESSION_TIME_ZONE = "baton_time_zone"


class PreferenceRefused(ValueError):
    """A language or time zone Baton does not offer; the message says which are."""


@dataclass(frozen=True)
class Chosen:
    """What one person chose: "" for either means the default."""

    language: str = ""
    time_zone: str = ""


def languages() -> list[tuple[str, str]]:
    """Return the languages a person may choose, as (code, name in that language)."""
    return list(settings.LANGUAGES)


@cache
def time_zones() -> tuple[str, ...]:
    """Return the IANA time zone names a person may choose, sorted."""
    return tuple(sorted(zoneinfo.available_timezones() - {"localtime", "Factory"}))


def chosen_by(user: Any) -> Chosen:
    """Return `user`'s stored choice (blank fields when they never chose)."""
    found = Preferences.objects.filter(user=user).values_list("language", "time_zone").first()
    return Chosen(*found) if found else Chosen()


def save_preferences(*, user: Any, language: str, time_zone: str) -> Chosen:
    """Store `user`'s language and time zone ("" for the default); refuse unknown ones."""
    language, time_zone = language.strip(), time_zone.strip()
    if language and language not in dict(languages()):
        offered = ", ".join(code for code, _name in languages())
        raise PreferenceRefused(
            _("Baton speaks %(offered)s, not “%(language)s”.")
            % {"offered": offered, "language": language[:20]}
        )
    if time_zone and time_zone not in time_zones():
        raise PreferenceRefused(
            _("“%(zone)s” is not a time zone: choose one such as Europe/Berlin.")
            % {"zone": time_zone[:64]}
        )
    Preferences.objects.update_or_create(
        user=user, defaults={"language": language, "time_zone": time_zone}
    )
    return Chosen(language=language, time_zone=time_zone)


def remember_in_session(session: Any, chosen: Chosen) -> None:
    """Copy a choice into a session, where config.locale finds it without a query."""
    session[SESSION_LANGUAGE] = chosen.language
    session[SESSION_TIME_ZONE] = chosen.time_zone


def remember_on_sign_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """On `user_logged_in`: carry the person's stored choice into their new session."""
    if request is not None and hasattr(request, "session"):
        remember_in_session(request.session, chosen_by(user))


def chosen_by_each(people: Iterable[Any]) -> dict[Any, Chosen]:
    """Return each person's stored choice by their primary key, in one query (those who
    never chose are left out)."""
    rows = Preferences.objects.filter(user__in=list(people)).values_list(
        "user_id", "language", "time_zone"
    )
    return {user_id: Chosen(language, time_zone) for user_id, language, time_zone in rows}


@contextmanager
def speaking(chosen: Chosen) -> Iterator[None]:
    """Within the block, write in the person's language and time zone: for what is made
    for someone outside their own request (a notification, an email). A blank language
    is the site's LANGUAGE_CODE, a blank time zone its TIME_ZONE."""
    language = chosen.language if chosen.language in dict(languages()) else ""
    zone: Any = None
    if chosen.time_zone:
        try:
            zone = zoneinfo.ZoneInfo(chosen.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            zone = None
    with (
        translation.override(language or settings.LANGUAGE_CODE),
        timezone.override(zone or timezone.get_default_timezone()),
    ):
        yield
