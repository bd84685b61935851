"""The site served under /elsewhere/: a URL configuration tests switch to."""

from django.urls import include, path

urlpatterns = [
    path("elsewhere/requests/", include("approvals.requests.urls")),
    path("elsewhere/", include("approvals.inbox.urls")),
]
