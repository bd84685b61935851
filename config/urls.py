"""Top-level URL routes."""

from django.contrib import admin
from django.urls import include, path

from approvals.sso import views as sso_views
from config.api import api

# The admin's password form steps aside while BATON_LOCAL_LOGIN is off.
admin.site.login = sso_views.admin_login

urlpatterns = [
    path("accounts/login/", sso_views.SignInView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("oidc/", include("approvals.sso.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("requests/", include("approvals.requests.urls")),
    path("console/", include("approvals.console.urls")),
    path("", include("approvals.inbox.urls")),
]

# A 500 page, or a 503 while the database cannot be reached (config.outages).
handler500 = "config.outages.server_error"
