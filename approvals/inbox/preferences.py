"""The signed-in person's language and time zone: one form, saved by approvals.preferences.

Saving also copies the choice into the session, so the very next page (the redirect)
is already in the chosen language and time zone (config.locale).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from approvals import preferences


@login_required
@require_http_methods(["GET", "POST"])
def preferences_page(request: HttpRequest) -> HttpResponse:
    """Show the person's choice; POST saves a new one (422 and the reason if refused)."""
    error = ""
    chosen = preferences.chosen_by(request.user)
    if request.method == "POST":
        wanted = preferences.Chosen(
            language=request.POST.get("language", ""), time_zone=request.POST.get("time_zone", "")
        )
        try:
            chosen = preferences.save_preferences(
                user=request.user, language=wanted.language, time_zone=wanted.time_zone
            )
        except preferences.PreferenceRefused as problem:
            error = str(problem)
            chosen = wanted
        else:
            preferences.remember_in_session(request.session, chosen)
            # The confirmation is read on the next page: say it in the new language.
            with translation.override(chosen.language or translation.get_language()):
                messages.success(request, _("Saved your language and time zone."))
            return redirect("approvals:preferences")
    context = {
        "chosen": chosen,
        "languages": preferences.languages(),
        "time_zones": preferences.time_zones(),
        "current_time_zone": timezone.get_current_timezone_name(),
        "error": error,
    }
    status = 422 if error else 200
    return render(request, "approvals/inbox/preferences.html", context, status=status)
