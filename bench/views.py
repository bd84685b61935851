"""The baseline page: 25 rows from a template, no query of its own, behind the inbox's login.

It pays what every signed-in page pays (the session and the user, the middleware
and the base template), so the inbox's figures beside it show what the inbox adds.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

ROWS = [
    {"title": f"Bench row {number}", "workflow": "bench", "priority": "Normal", "state": "open"}
    for number in range(1, 26)
]


@login_required
@require_GET
def bare(request: HttpRequest) -> HttpResponse:
    return render(request, "bench/bare.html", {"rows": ROWS})
