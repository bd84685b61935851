"""Top-level URL routes."""

from django.contrib import admin
from django.urls import include, path

from config.api import api

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("requests/", include("approvals.requests.urls")),
    path("console/", include("approvals.console.urls")),
    path("", include("approvals.inbox.urls")),
]

# A 500 page, or a 503 while the database cannot be reached (config.outages).
handler500 = "config.outages.server_error"
