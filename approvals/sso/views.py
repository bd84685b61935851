"""The sign-in page: the password form (unless BATON_LOCAL_LOGIN is off) and the single
sign-on button (when a provider is configured), and the provider's round trip, which
answers 404 while no provider is configured."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import LoginView, redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

PASSWORDS_OFF = gettext_lazy(
    "Signing in with a password is turned off here: sign in with %(provider)s instead."
)


class SignInView(LoginView):
    """Django's login page, with the SSO button, and without passwords when they are off."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.BATON_LOCAL_LOGIN:
            return _passwords_off(request)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(
            local_login=settings.BATON_LOCAL_LOGIN,
            sso=settings.BATON_OIDC_ENABLED,
            sso_provider=settings.BATON_OIDC_PROVIDER_NAME,
            sso_failed=self.request.GET.get("sso") == "failed",
        )
        return context


def _passwords_off(request: HttpRequest) -> HttpResponse:
    message = PASSWORDS_OFF % {"provider": settings.BATON_OIDC_PROVIDER_NAME}
    return render(
        request,
        "registration/login.html",
        {
            "local_login": False,
            "sso": settings.BATON_OIDC_ENABLED,
            "sso_provider": settings.BATON_OIDC_PROVIDER_NAME,
            "refusal": message,
            "next": request.POST.get("next", ""),
        },
        status=403,
    )


def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's sign-in: its own password form, or Baton's sign-in page when passwords
    are off (the admin's form would only be refused)."""
    if not settings.BATON_LOCAL_LOGIN:
        if request.method == "POST":
            return _passwords_off(request)
        if not request.user.is_authenticated:
            return redirect_to_login(request.GET.get("next") or "/admin/")
    return _admin_site_login(request, extra_context)


_admin_site_login = admin.site.login


def sso_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Answer 404 while no provider is configured."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.BATON_OIDC_ENABLED:
            raise Http404(_("Single sign-on is not configured."))
        return view(request, *args, **kwargs)

    return guarded


start = sso_only(OIDCAuthenticationRequestView.as_view())
callback = sso_only(OIDCAuthenticationCallbackView.as_view())
