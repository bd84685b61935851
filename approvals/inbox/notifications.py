"""The signed-in person's notifications: the list, marking read, the email choice, the badge.

Views translate one request into one call of `approvals.notify.notifications`; the header's
unread badge is fetched by htmx after the page loads (and every minute), so no page
pays a query for it, and it stays a plain link without JavaScript.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from approvals.notify import notifications
from approvals.states import EmailMode

_TEMPLATE = "approvals/inbox/notifications.html"


@login_required
@require_http_methods(["GET", "POST"])
def notification_list(request: HttpRequest) -> HttpResponse:
    """The newest notifications, unread first marked; POST changes the email choice."""
    error = ""
    if request.method == "POST":
        try:
            notifications.set_email_mode(user=request.user, mode=request.POST.get("email", ""))
        except ValueError as problem:
            error = str(problem)
        else:
            messages.success(request, _("Saved how you get notifications by email."))
            return redirect("approvals:notifications")
    context = {
        "notifications": notifications.recent(user=request.user),
        "email_mode": notifications.email_mode(user=request.user),
        "email_modes": EmailMode.choices,
        "error": error,
    }
    return render(request, _TEMPLATE, context, status=422 if error else 200)


@login_required
@require_POST
def mark_read(request: HttpRequest) -> HttpResponse:
    """Mark one notification read (`id`), or all of them; then back to the list."""
    raw = request.POST.get("id", "")
    notification_id = int(raw) if raw.isascii() and raw.isdigit() else None
    if raw and notification_id is None:
        messages.error(request, _("That notification could not be found."))
        return redirect("approvals:notifications")
    notifications.mark_read(user=request.user, notification_id=notification_id, now=timezone.now())
    if request.htmx:
        return badge(request)
    return redirect("approvals:notifications")


@login_required
@require_GET
def badge(request: HttpRequest) -> HttpResponse:
    count = notifications.unread_count(user=request.user)
    label = f"{notifications.UNREAD_CAP - 1}+" if count >= notifications.UNREAD_CAP else str(count)
    return render(
        request, f"{_TEMPLATE}#notification-badge", {"unread": count, "unread_label": label}
    )
