"""The operators' run console's routes, under /console/."""

from django.urls import path

from approvals.console import views

app_name = "console"

urlpatterns = [
    path("", views.runs, name="runs"),
    path("sla/", views.sla, name="sla"),
    path("tasks/", views.tasks, name="tasks"),
    path("versions/", views.versions, name="versions"),
    path("audit/", views.audit_export, name="audit_export"),
    path("retry-dead-letters/", views.retry_dead_letters, name="retry_dead_letters"),
    path("webhooks/", views.webhooks_list, name="webhooks"),
    path("webhooks/<uuid:endpoint_id>/", views.webhook_detail, name="webhook"),
    path(
        "webhooks/<uuid:endpoint_id>/rotate-secret/",
        views.rotate_webhook_secret,
        name="rotate_webhook_secret",
    ),
    path("webhooks/<uuid:endpoint_id>/delete/", views.delete_webhook, name="delete_webhook"),
    path(
        "webhooks/deliveries/<uuid:delivery_id>/redeliver/",
        views.redeliver_webhook,
        name="redeliver_webhook",
    ),
    path("runs/<uuid:run_id>/", views.run_detail, name="run"),
    path("runs/<uuid:run_id>/steps/<str:node>/skip/", views.skip, name="skip"),
    path("runs/<uuid:run_id>/move/", views.move, name="move"),
    path("runs/<uuid:run_id>/<slug:action>/", views.act, name="act"),
]
