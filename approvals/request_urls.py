"""The requesters' routes, under /requests/."""

from django.urls import path

from approvals import request_views

app_name = "requests"

urlpatterns = [
    path("", request_views.my_requests, name="mine"),
    path("new/", request_views.new_request, name="new"),
    path("new/<str:workflow_type>/", request_views.start_request, name="start"),
    path("<uuid:run_id>/", request_views.request_detail, name="detail"),
    path("<uuid:run_id>/withdraw/", request_views.withdraw, name="withdraw"),
    path("<uuid:run_id>/revise/", request_views.revise, name="revise"),
    path("<uuid:run_id>/comment/", request_views.comment, name="comment"),
]
