"""The operators' run console's routes, under /console/."""

from django.urls import path

from approvals import console_views

app_name = "console"

urlpatterns = [
    path("", console_views.runs, name="runs"),
    path("sla/", console_views.sla, name="sla"),
    path("tasks/", console_views.tasks, name="tasks"),
    path("versions/", console_views.versions, name="versions"),
    path("retry-dead-letters/", console_views.retry_dead_letters, name="retry_dead_letters"),
    path("runs/<uuid:run_id>/", console_views.run_detail, name="run"),
    path("runs/<uuid:run_id>/steps/<str:node>/skip/", console_views.skip, name="skip"),
    path("runs/<uuid:run_id>/<slug:action>/", console_views.act, name="act"),
]
