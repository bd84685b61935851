"""Top-level URL routes."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
