"""Request ids: one per request, carried into every log line written while it is handled.

`RequestIdMiddleware` takes the id a proxy in front sent as X-Request-ID (when it
looks like an id) or makes one, keeps it while the request is handled, and sends
it back in the response's X-Request-ID. `RequestIdFilter`, on the log handler,
writes it on each record as `request_id`, so Django's "Internal Server Error"
line with its traceback, the API's own error line and the engine's lines of one
request can be found together, and a person can quote the id from the response.
Records written outside a request carry an empty id.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-ID"
# What an incoming id may look like: a proxy's UUID, hex digest or similar token.
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_current: ContextVar[str] = ContextVar("request_id", default="")


def current_request_id() -> str:
    """Return the id of the request being handled, or "" outside a request."""
    return _current.get()


class RequestIdMiddleware:
    """Give each request an id (the caller's X-Request-ID if well formed) and answer with it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get(HEADER, "")
        request_id = incoming if _WELL_FORMED.fullmatch(incoming) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        token = _current.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            _current.reset(token)
        response[HEADER] = request_id
        return response


class RequestIdFilter(logging.Filter):
    """Write the request's id on each record as `request_id`; never drop a record.

    Django logs a 5xx answer's line after the middleware has returned, so the id
    is read from the record's own request first, then from the request being handled.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        record.request_id = getattr(request, "request_id", "") or current_request_id()
        return True
