"""The provider's round trip: the SSO button's start, and the provider's answer."""

from django.urls import path

from approvals.sso import views

urlpatterns = [
    # mozilla-django-oidc's names, which its views reverse.
    path("authenticate/", views.start, name="oidc_authentication_init"),
    path("callback/", views.callback, name="oidc_authentication_callback"),
]
