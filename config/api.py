"""The REST API v1: routers from the apps, authentication, and errors as problem+json.

No anonymous access: a per-user Bearer token (see workflows.tokens) or the
browser's session with its CSRF token. Every error is RFC 9457
application/problem+json with a plain-words `detail`; nothing internal (stack
traces, SQL) ever reaches a caller, and any 5xx is logged as a bug, except a 503
while the database cannot be reached (config.outages), logged as a warning.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.core.signals import setting_changed
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.responses import NinjaJSONEncoder
from ninja.security import HttpBearer, SessionAuth

from approvals import throttling
from approvals.console.api import router as console_router
from approvals.console.webhooks_api import router as webhooks_router
from approvals.inbox.api import router as tasks_router
from approvals.inbox.personal_api import router as me_router
from approvals.requests.api import router as files_router
from approvals.sso import access_tokens
from approvals.states import Channel
from approvals.task_forms import document_task_forms
from config import locale, outages
from workflows import field_errors, registry, tokens
from workflows.api import ApiProblem, document_updates, signals_router
from workflows.api import router as workflows_router

logger = logging.getLogger("baton.api")
PROBLEM = "application/problem+json"


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        """Return the token's user (Baton's own token, or the single sign-on provider's
        access token: approvals.sso.access_tokens); count a wrong token against the
        token it names, or against the sender's address when it names none (a
        provider's token that fails its checks is one of those: approvals.throttling).

        A right token is accepted even while its identity or its sender's address is
        locked: nobody guesses 256 bits of secret, so a lockout could only be used by
        others to lock out its holder. A wrong one while locked answers 429.
        """
        claimed = tokens.claimed_token(token)
        user = tokens.accept_token(claimed, token)
        if user is None and claimed is None:
            # Not one of Baton's: perhaps the single sign-on provider's access token.
            user = access_tokens.user_for(token)
        if user is not None:
            request.user = user
            locale.activate_for_token(request, user)
            return user
        identity = claimed.prefix if claimed else None
        lockout = throttling.lockout_of(request, token=identity) or throttling.record_failure(
            request, token=identity, channel=Channel.API
        )
        if lockout is not None:
            raise throttling.LockedOut(lockout)
        return None


class BrowserSession(SessionAuth):
    """The signed-in browser's session, whose CSRF token is checked only when it is the
    session that signs the request in: ninja's own checks CSRF first, so a caller with
    neither a session nor a token heard "CSRF check failed" (403) instead of 401."""

    def _get_key(self, request: HttpRequest) -> str | None:
        if not request.user.is_authenticated:
            return None
        return super()._get_key(request)


class BatonAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation: Any) -> str:
        """The view's own name (`start_workflow`, `decide_task`): what a generated client
        calls the operation (test_typed_client fails on two of one name)."""
        return operation.view_func.__name__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The document as JSON, by (root path, language, registry.changes()).
        self._documents: dict[tuple[str, str | None, int], str] = {}
        setting_changed.connect(self._forget_documents, weak=False)

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The OpenAPI document, built once per root path, language and set of registered
        definitions: building it takes a third of a second of CPU, and anyone may ask for
        it, so building it per request let plain GETs keep a web process busy. Each caller
        gets its own copy."""
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        changes = registry.changes()
        key = (path_prefix, translation.get_language(), changes)
        document = self._documents.get(key)
        if document is None:
            schema = self._build_openapi_schema(path_prefix)
            document = json.dumps(schema, cls=NinjaJSONEncoder)
            kept = {k: v for k, v in self._documents.items() if k[2] == changes}
            self._documents = {**kept, key: document}
        return json.loads(document)

    def _build_openapi_schema(self, path_prefix: str) -> dict[str, Any]:
        """Document error bodies as application/problem+json, as they are sent, and each
        workflow type's task forms (approvals.task_forms.document_task_forms), update
        payloads and queries (workflows.api.document_updates)."""
        schema = document_task_forms(super().get_openapi_schema(path_prefix=path_prefix))
        schema = document_updates(schema)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if str(status) >= "400" and "application/json" in content:
                        response["content"] = {PROBLEM: content.pop("application/json")}
        return schema

    def _forget_documents(self, **kwargs: Any) -> None:
        """A test's settings (its languages, say) may change what the document says."""
        self._documents = {}


api = BatonAPI(
    title="Baton API",
    version="1",
    description=(
        "Start, query, signal and cancel workflow runs; work human tasks. Every error is"
        " application/problem+json: a body over BATON_MAX_BODY_BYTES answers 413, a query"
        " string over 4096 characters 414. A request line over 8190 bytes never reaches the"
        " API: gunicorn refuses it with a plain-text 414."
    ),
    urls_namespace="api",
    auth=[BearerToken(), BrowserSession()],
)
# The console's actions first: "/workflows/retry-dead-letters" would otherwise be read
# as a run id by the workflows router's "/workflows/{run_id}".
api.add_router("/workflows", console_router)
api.add_router("/workflows", workflows_router)
api.add_router("/tasks", tasks_router)
api.add_router("/signals", signals_router)
api.add_router("/webhooks", webhooks_router)
api.add_router("/me", me_router)
api.add_router("", files_router)

# The longest query string the API reads, in characters as sent. gunicorn.conf.py lets
# request lines through up to 8190 bytes, so a client past this limit (and short of
# that one) gets a problem+json 414 rather than gunicorn's HTML page.
MAX_QUERY_STRING = 4096


def limit_query_string(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Refuse an over-long query string with 414 before authentication or validation."""

    @functools.wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        length = len(request.META.get("QUERY_STRING", ""))
        if length > MAX_QUERY_STRING:
            return problem(
                414,
                _("URI too long"),
                _(
                    "The query string has %(length)s characters; this API reads at most"
                    " %(most)s. Send fewer or shorter parameters."
                )
                % {"length": length, "most": MAX_QUERY_STRING},
            )
        return view(request, *args, **kwargs)

    return checked


api.add_decorator(limit_query_string, mode="view")


def refuse_control_characters(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Refuse a path holding a control character (a NUL byte, a newline) with 400, before
    authentication: no API path holds one, and PostgreSQL refuses NUL in text, so a
    failed token's record (which keeps the path) would otherwise fail with it."""

    @functools.wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        found = _CONTROL.search(request.path_info)
        if found:
            return problem(
                400,
                _("Bad request"),
                _(
                    "The path holds the control character %(code)s, which no"
                    " API path contains. Nothing was done."
                )
                % {"code": f"U+{ord(found.group()):04X}"},
            )
        return view(request, *args, **kwargs)

    return checked


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
api.add_decorator(refuse_control_characters, mode="view")


def problem(status: int, title: str, detail: str, **extra: Any) -> HttpResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    response = HttpResponse(json.dumps(body, default=str), status=status, content_type=PROBLEM)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="baton"'
    return response


@api.exception_handler(ApiProblem)
def on_problem(request: HttpRequest, error: ApiProblem) -> HttpResponse:
    return problem(**error.body)


@api.exception_handler(ValidationError)
def on_invalid(request: HttpRequest, error: ValidationError) -> HttpResponse:
    errors = [_described(item) for item in error.errors]
    unknown = [item["field"] for item in errors if item["message"] == str(UNKNOWN_FIELD)]
    detail = _("The request does not fit the API.")
    if unknown:
        detail += " " + _("Unknown fields: %(fields)s.") % {"fields": ", ".join(unknown)}
    return problem(422, _("Invalid request"), detail, errors=errors)


UNKNOWN_FIELD = gettext_lazy("is not a field of this request")


def _described(item: dict[str, Any]) -> dict[str, str]:
    """One of pydantic's errors in the reader's language (workflows.field_errors)."""
    described = field_errors.described(item, field=_field(item["loc"]))
    if item.get("type") == "extra_forbidden":
        described["message"] = str(UNKNOWN_FIELD)
    return described


def _field(location: tuple[Any, ...] | list[Any]) -> str:
    """Name a field as the caller wrote it: ("body", "body", "type") reads "type"."""
    parts = [str(part) for part in location]
    source, rest = parts[0], parts[1:]
    if rest and rest[0] in {"body", "query"}:
        rest = rest[1:]
    return ".".join(rest) or source


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request: HttpRequest, error: AuthenticationError) -> HttpResponse:
    return problem(
        401, _("Unauthorized"), _("Send 'Authorization: Bearer <token>' or sign in (with CSRF).")
    )


@api.exception_handler(throttling.LockedOut)
def on_locked_out(request: HttpRequest, error: throttling.LockedOut) -> HttpResponse:
    response = problem(429, _("Too many failed attempts"), error.lockout.message)
    response["Retry-After"] = str(error.lockout.retry_after)
    return response


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, error: HttpError) -> HttpResponse:
    return problem(error.status_code, _("Error"), str(error))


@api.exception_handler(RequestDataTooBig)
def on_too_big(request: HttpRequest, error: RequestDataTooBig) -> HttpResponse:
    return problem(413, _("Body too large"), _("The request body is larger than this API accepts."))


@api.exception_handler(MultiPartParserError)
def on_unreadable_multipart(request: HttpRequest, error: MultiPartParserError) -> HttpResponse:
    return problem(
        400,
        _("Bad request"),
        _(
            "The multipart/form-data body could not be read (%(error)s): send the files as a"
            " multipart/form-data body with its boundary."
        )
        % {"error": error},
    )


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def on_database_error(request: HttpRequest, error: Exception) -> HttpResponse:
    """503 while the database cannot be reached (config.outages); any other database
    error (a deadlock, a serialization failure) is a bug like any other."""
    if outages.is_unreachable(error):
        return outages.unavailable(request, error)
    return on_bug(request, error)


@api.exception_handler(Exception)
def on_bug(request: HttpRequest, error: Exception) -> HttpResponse:
    logger.exception("api.unhandled_error", extra={"path": request.path})
    return problem(
        500, _("Internal error"), _("Something went wrong on our side; it has been logged.")
    )
