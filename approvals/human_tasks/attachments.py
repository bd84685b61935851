"""Files attached to a request or to one of its tasks.

Each file is checked by what its content is (its magic numbers, with the `filetype`
package), never by its name or the type its sender claims, and by its size; a request
with one bad file attaches none, and says which and why. Files are stored through
Django's storage API (the file system by default; S3 and the like with django-storages)
under their own id, never their name, and served only to people who may see the
request. Each one's SHA-256 is written to the audit chain as it is attached, so that
`verify_audit` finds a file swapped in storage afterwards (`verify_attachments`).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any
from uuid import UUID

import filetype
from auditlog.models import LogEntry
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from django.http import FileResponse
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from approvals import audit
from approvals.human_tasks.acting import visible_task
from approvals.human_tasks.errors import InvalidRequest
from approvals.models import Attachment
from approvals.request_pages import RequestNotFound, visible_request

# What may be attached, by the type its content shows, and how people call it.
ACCEPTED = {
    "application/pdf": gettext_lazy("PDF"),
    "image/png": gettext_lazy("PNG image"),
    "image/jpeg": gettext_lazy("JPEG image"),
    "image/gif": gettext_lazy("GIF image"),
    "image/webp": gettext_lazy("WebP image"),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": gettext_lazy(
        "Word document"
    ),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": gettext_lazy(
        "Excel workbook"
    ),
    "application/vnd.oasis.opendocument.text": gettext_lazy("OpenDocument text"),
    "application/vnd.oasis.opendocument.spreadsheet": gettext_lazy("OpenDocument spreadsheet"),
    "text/plain": gettext_lazy("plain text"),
}
ACCEPTED_IN_WORDS = gettext_lazy(
    "a PDF, an image (PNG, JPEG, GIF or WebP), a Word, Excel or OpenDocument file,"
    " or plain text (CSV too)"
)
# How many files one form or request may carry.
MAX_FILES = 10
_HEAD_BYTES = 8192
_CHUNK = 64 * 1024
_NAME_LENGTH = Attachment._meta.get_field("name").max_length


@dataclass(frozen=True)
class Checked:
    """An upload that passed: what it is, as its content says."""

    upload: UploadedFile
    name: str
    content_type: str
    size: int
    sha256: str


def max_bytes() -> int:
    return settings.BATON_ATTACHMENT_MAX_BYTES


def check(uploads: Iterable[UploadedFile]) -> list[Checked]:
    """Check every upload before any is kept; raise InvalidRequest naming the first bad
    one and why (too big, empty, or of a kind not accepted)."""
    uploads = list(uploads)
    if len(uploads) > MAX_FILES:
        raise InvalidRequest(
            _("Attach at most %(most)s files at once, not %(count)s.")
            % {"most": MAX_FILES, "count": len(uploads)}
        )
    return [_check(upload) for upload in uploads]


def _check(upload: UploadedFile) -> Checked:
    name = clean_name(upload.name or "")
    digest, size, head = hashlib.sha256(), 0, b""
    upload.seek(0)
    for chunk in upload.chunks(_CHUNK):
        size += len(chunk)
        if size > max_bytes():
            raise InvalidRequest(
                _(
                    "The file “%(name)s” is over %(size)s: attachments may be"
                    " at most %(size)s. Nothing was attached."
                )
                % {"name": name, "size": _in_words(max_bytes())}
            )
        if len(head) < _HEAD_BYTES:
            head += chunk[: _HEAD_BYTES - len(head)]
        digest.update(chunk)
    upload.seek(0)
    if size == 0:
        raise InvalidRequest(
            _("The file “%(name)s” is empty. Nothing was attached.") % {"name": name}
        )
    content_type = kind_of(head)
    if content_type not in ACCEPTED:
        if content_type:
            message = _(
                "The file “%(name)s” holds %(type)s, whatever its name says: attach"
                " %(accepted)s. Nothing was attached."
            )
        else:
            message = _(
                "The file “%(name)s” holds nothing Baton can tell, whatever its name says:"
                " attach %(accepted)s. Nothing was attached."
            )
        raise InvalidRequest(
            message % {"name": name, "type": content_type, "accepted": ACCEPTED_IN_WORDS}
        )
    return Checked(upload, name, content_type, size, digest.hexdigest())


def kind_of(head: bytes) -> str | None:
    """The MIME type the first bytes of a file show; "text/plain" for text in UTF-8 with
    no control characters but line breaks and tabs; None if nothing is recognised."""
    found = filetype.guess_mime(head)
    if found:
        return found
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 3:  # not merely a character cut at the 8 KB mark
            return None
        text = head[: error.start].decode("utf-8")
    if all(char in "\t\n\r" or unicodedata.category(char) != "Cc" for char in text):
        return "text/plain"
    return None


def clean_name(name: str) -> str:
    """The file's own name, without any folder, control characters or leading dots."""
    base = PureWindowsPath(PurePosixPath(name).name).name
    base = "".join(char for char in base if unicodedata.category(char)[0] != "C").strip()
    return base.lstrip(".")[:_NAME_LENGTH] or "attachment"


def attach(
    *,
    user: Any,
    uploads: Iterable[UploadedFile],
    channel: str,
    run_id: UUID | None = None,
    task_id: UUID | None = None,
    now: datetime | None = None,
    remote_addr: str | None = None,
) -> list[Attachment]:
    """Attach files to a task (`task_id`: whoever may see it) or to a request (`run_id`:
    whoever may see its page). All or none: every file is checked before any is kept."""
    if task_id is not None:
        task = visible_task(task_id=task_id, user=user)
        run_id = task.run_id
    else:
        task = None
        assert run_id is not None, "attach to a task or to a request"
        visible_request(run_id=run_id, user=user)
    return keep(
        checked=check(uploads),
        run_id=run_id,
        task_id=task.pk if task else None,
        user=user,
        channel=channel,
        now=now or timezone.now(),
        remote_addr=remote_addr,
    )


def keep(
    *,
    checked: list[Checked],
    run_id: UUID,
    task_id: UUID | None,
    user: Any,
    channel: str,
    now: datetime,
    remote_addr: str | None,
) -> list[Attachment]:
    """Store checked files and audit each, in one transaction; a file stored before a
    failure is removed again, so storage holds no file without its row."""
    kept: list[Attachment] = []
    try:
        with transaction.atomic():
            for item in checked:
                attachment = Attachment(
                    run_id=run_id,
                    task_id=task_id,
                    uploaded_by=user,
                    name=item.name,
                    content_type=item.content_type,
                    size=item.size,
                    sha256=item.sha256,
                    created_at=now,
                )
                attachment.file.save(attachment.pk.hex, item.upload, save=False)
                kept.append(attachment)
                attachment.save()
                audit.record_attachment(
                    attachment=attachment,
                    actor=user,
                    channel=channel,
                    now=now,
                    remote_addr=remote_addr,
                )
    except BaseException:
        for attachment in kept:
            attachment.file.delete(save=False)
        raise
    return kept


def for_download(*, attachment_id: UUID, user: Any) -> Attachment:
    """The attachment, if `user` may see its request; RequestNotFound otherwise."""
    attachment = Attachment.objects.filter(pk=attachment_id).first()
    if attachment is None or not attachment.file:  # none, or erased (approvals.privacy)
        raise RequestNotFound()
    visible_request(run_id=attachment.run_id, user=user)
    return attachment


def download(attachment: Attachment) -> FileResponse:
    """The file as a download, never shown inline, under the type its content was found
    to be, and sandboxed should a browser open it anyway."""
    response = FileResponse(
        attachment.file.open("rb"),
        as_attachment=True,
        filename=attachment.name,
        content_type=attachment.content_type,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    response["Cache-Control"] = "private, no-store"
    return response


def of_request(run_id: UUID) -> list[Attachment]:
    return list(Attachment.objects.filter(run_id=run_id).select_related("uploaded_by", "task"))


def forget_files_of(run_ids: list[Any]) -> None:
    """Remove the stored files of these runs' attachments once the transaction deleting
    their rows commits (retention's prune hook): never a file whose row stays."""
    if connection.vendor == "postgresql":
        # One array parameter, not one per run: a batch is 10,000 runs.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT file FROM approvals_attachment WHERE run_id = ANY(%s) AND file <> ''",
                [list(run_ids)],
            )
            names = [row[0] for row in cursor.fetchall()]
    else:
        attached = Attachment.objects.filter(run_id__in=run_ids).exclude(file="")
        names = list(attached.values_list("file", flat=True))
    if names:
        transaction.on_commit(lambda: _delete_files(names))


def _delete_files(names: list[str]) -> None:
    for name in names:
        default_storage.delete(name)


@dataclass(frozen=True)
class Mismatch:
    attachment: Attachment
    problem: str


def verify_attachments() -> Iterator[Mismatch]:
    """Each attachment whose stored file, or row, no longer has the SHA-256 the audit
    chain holds for it (the chain itself is checked by audit.verify_audit_chain)."""
    audited = _audited_hashes()
    erased = _erased()
    for attachment in Attachment.objects.order_by("created_at", "id").iterator():
        held = audited.get(str(attachment.pk))
        if held is None:
            yield Mismatch(attachment, "has no audit entry holding its SHA-256")
            continue
        if not attachment.file:
            if str(attachment.pk) not in erased:
                yield Mismatch(attachment, "has lost its file, and no erasure says why")
            continue
        if attachment.sha256 != held:
            yield Mismatch(attachment, "has a SHA-256 in its row that the audit chain does not")
            continue
        try:
            stored = _sha256_of_stored(attachment)
        except OSError:
            yield Mismatch(attachment, "is missing from storage")
            continue
        if stored != held:
            yield Mismatch(attachment, "was changed in storage since it was attached")


def _audited_hashes() -> dict[str, str]:
    entries = LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(Attachment),
        additional_data__event="attached",
    ).values_list("object_pk", "changes")
    return {object_pk: _new_value(changes, "sha256") for object_pk, changes in entries}


def _erased() -> set[str]:
    """The attachments whose files a chained `personal_data_erased` entry removed."""
    entries = LogEntry.objects.filter(
        additional_data__event="personal_data_erased", additional_data__has_key="chain"
    ).values_list("changes", flat=True)
    erased = set()
    for changes in entries:
        if isinstance(changes, str):  # auditlog may keep its changes as text
            changes = json.loads(changes)
        erased.update(str(pk) for pk in (changes or {}).get("attachments", []))
    return erased


def _new_value(changes: Any, field: str) -> str:
    return (changes or {}).get(field, [None, None])[1]


def _sha256_of_stored(attachment: Attachment) -> str:
    digest = hashlib.sha256()
    with attachment.file.open("rb") as stored:
        for chunk in iter(lambda: stored.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _in_words(size: int) -> str:
    return filesizeformat(size).replace("\xa0", " ")
