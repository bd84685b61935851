"""Pages never hand the browser a bidi control character that came from data.

An embedding, override or isolate character (U+202A to U+202E, U+2066 to U+2069)
in a title, a comment or a run's input reorders what is shown after it: a task
titled "invoice\u202egpj.exe" reads "invoiceexe.jpg". Old rows may hold such
characters, and any new field or template could show them, so rather than a
filter every template must remember, each HTML answer passes through
workflows.cleaning.neutralise_bidi on its way out, which shows each one as its
code point ("invoice[U+202E]gpj.exe"). Baton's templates hold none themselves.
Emails do the same in approvals.notify.emails; the JSON API returns data as stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from workflows.cleaning import BIDI_CONTROLS, neutralise_bidi

# The characters as UTF-8 bytes: most pages hold none, and are passed on unread.
_ENCODED = re.compile(b"|".join(re.escape(c.encode()) for c in sorted(BIDI_CONTROLS)))


class NeutraliseBidiMiddleware:
    """Show bidi controls in HTML answers as their code points; leave other answers alone."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
            return response
        charset = response.charset
        if charset.lower().replace("-", "") == "utf8" and not _ENCODED.search(response.content):
            return response
        response.content = neutralise_bidi(response.content.decode(charset)).encode(charset)
        return response
