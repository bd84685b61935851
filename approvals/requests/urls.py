"""The requesters' routes, under /requests/."""

from django.urls import path

from approvals.requests import views

app_name = "requests"

urlpatterns = [
    path("", views.my_requests, name="mine"),
    path("new/", views.new_request, name="new"),
    path("new/<str:workflow_type>/", views.start_request, name="start"),
    path("<uuid:run_id>/", views.request_detail, name="detail"),
    path("<uuid:run_id>/withdraw/", views.withdraw, name="withdraw"),
    path("<uuid:run_id>/revise/", views.revise, name="revise"),
    path("<uuid:run_id>/comment/", views.comment, name="comment"),
    path("<uuid:run_id>/attach/", views.attach, name="attach"),
    path("files/<uuid:attachment_id>/", views.attachment, name="attachment"),
]
