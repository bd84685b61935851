"""REST API v1 for a request's files: list them, attach more, download one.

The same use case as the request and task pages (approvals.human_tasks.attachments):
whoever may see the request may list, attach and download; every file is checked by
its content before any is kept.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import FileResponse, HttpRequest
from django.urls import reverse
from django.utils.translation import gettext as _
from ninja import Field, File, Router, Schema, Status, UploadedFile

from approvals.human_tasks import TaskError, attachments
from approvals.models import Attachment
from approvals.request_pages import RequestNotFound, visible_request
from approvals.states import Channel
from workflows.api import ERRORS, ApiProblem, not_found
from workflows.client_address import client_address

router = Router(tags=["files"])


class AttachmentOut(Schema):
    id: UUID
    run_id: UUID
    task_id: UUID | None
    name: str
    content_type: str = Field(
        description="the type its content was found to be, not the one it was sent with"
    )
    size: int
    sha256: str
    uploaded_by: str
    created_at: datetime
    url: str = Field(description="where to download it (GET, as an attachment)")


def attachment_out(attachment: Attachment) -> dict[str, Any]:
    return {
        "id": attachment.pk,
        "run_id": attachment.run_id,
        "task_id": attachment.task_id,
        "name": attachment.name,
        "content_type": attachment.content_type,
        "size": attachment.size,
        "sha256": attachment.sha256,
        "uploaded_by": attachment.uploaded_by.get_username(),
        "created_at": attachment.created_at,
        "url": reverse("api:download_attachment", args=[attachment.pk]),
    }


@router.get(
    "/requests/{run_id}/attachments",
    response={200: list[AttachmentOut], **ERRORS},
    summary="A request's files",
)
def list_attachments(request: HttpRequest, run_id: UUID) -> list[dict[str, Any]]:
    try:
        visible_request(run_id=run_id, user=request.user)
    except RequestNotFound:
        raise not_found(_("such request")) from None
    return [attachment_out(found) for found in attachments.of_request(run_id)]


@router.post(
    "/requests/{run_id}/attachments",
    response={201: list[AttachmentOut], **ERRORS},
    summary="Attach files to a request",
)
def attach_to_request(
    request: HttpRequest, run_id: UUID, files: File[list[UploadedFile]]
) -> Status:
    """multipart/form-data with one or more `files`: all kept, or none (422 says which
    and why: too big, empty, or of a kind not accepted, judged by its content)."""
    return _attach(request, files, run_id=run_id)


@router.post(
    "/tasks/{task_id}/attachments",
    response={201: list[AttachmentOut], **ERRORS},
    summary="Attach files to a task",
)
def attach_to_task(request: HttpRequest, task_id: UUID, files: File[list[UploadedFile]]) -> Status:
    """As attaching to its request, but recorded against the task (who may see the task
    may attach to it)."""
    return _attach(request, files, task_id=task_id)


def _attach(request: HttpRequest, files: list[UploadedFile], **target: UUID) -> Status:
    try:
        kept = attachments.attach(
            user=request.user,
            uploads=files,
            channel=Channel.API,
            remote_addr=client_address(request),
            **target,
        )
    except (RequestNotFound, TaskError) as refused:
        title = {404: _("Not found"), 403: _("Forbidden")}.get(refused.status, _("Invalid request"))
        raise ApiProblem(refused.status, title, str(refused)) from None
    return Status(201, [attachment_out(found) for found in kept])


@router.get(
    "/attachments/{attachment_id}",
    response={200: None, **ERRORS},
    summary="Download a file",
    url_name="download_attachment",
)
def download_attachment(request: HttpRequest, attachment_id: UUID) -> FileResponse:
    try:
        found = attachments.for_download(attachment_id=attachment_id, user=request.user)
    except RequestNotFound:
        raise not_found(_("such file")) from None
    return attachments.download(found)
