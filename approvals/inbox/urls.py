"""The inbox's routes, and the signed-in person's notifications."""

from django.urls import path

from approvals.inbox import notifications as notification_views
from approvals.inbox import preferences as preference_views
from approvals.inbox import views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("notifications/", notification_views.notification_list, name="notifications"),
    path("notifications/read/", notification_views.mark_read, name="mark_read"),
    path("notifications/badge/", notification_views.badge, name="notification_badge"),
    path("tasks/<uuid:task_id>/", views.human_task, name="task"),
    path("tasks/<uuid:task_id>/claim/", views.claim, name="claim"),
    path("tasks/<uuid:task_id>/release/", views.release, name="release"),
    path("tasks/<uuid:task_id>/approve/", views.approve, name="approve"),
    path("tasks/<uuid:task_id>/reject/", views.reject, name="reject"),
    path("tasks/<uuid:task_id>/complete/", views.complete, name="complete"),
    path("tasks/<uuid:task_id>/draft/", views.save_draft, name="save_draft"),
    path("tasks/<uuid:task_id>/request-changes/", views.request_changes, name="request_changes"),
    path("tasks/<uuid:task_id>/delegate/", views.delegate, name="delegate"),
    path("tasks/<uuid:task_id>/reassign/", views.reassign, name="reassign"),
    path("tasks/<uuid:task_id>/comment/", views.comment, name="comment"),
    path("tasks/<uuid:task_id>/snooze/", views.snooze, name="snooze"),
    path("tasks/<uuid:task_id>/attach/", views.attach, name="attach"),
    path("tasks/bulk-approve/", views.bulk_approve, name="bulk_approve"),
    path("filters/save/", views.save_filter, name="save_filter"),
    path("filters/<int:filter_id>/delete/", views.delete_filter, name="delete_filter"),
    path("users/", views.user_search, name="user_search"),
    path("away/", views.away, name="away"),
    path("preferences/", preference_views.preferences_page, name="preferences"),
    path("email/<str:token>/", views.email_link, name="email_link"),
]
