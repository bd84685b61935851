"""Attachments: checked by their content, kept through Django's storage, served only to
people who may see the request, each one's SHA-256 held by the audit chain."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from approvals import human_tasks
from approvals.human_tasks import InvalidForm, InvalidRequest, attachments
from approvals.models import Attachment
from approvals.request_pages import RequestNotFound

PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + b"\x00" * 64
EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + b"\x00" * 64


def upload(name: str, content: bytes, claimed: str = "application/pdf") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type=claimed)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


class TestWhatMayBeAttached:
    def test_a_pdf_is_kept_with_its_size_kind_and_sha256(self, manager_task, carol):
        [kept] = attachments.attach(
            task_id=manager_task.pk,
            user=carol,
            uploads=[upload("receipt.pdf", PDF)],
            channel="inbox",
        )

        assert (kept.name, kept.content_type, kept.size) == (
            "receipt.pdf",
            "application/pdf",
            len(PDF),
        )
        assert kept.sha256 == hashlib.sha256(PDF).hexdigest()
        assert kept.run_id == manager_task.run_id
        assert kept.file.read() == PDF

    def test_the_kind_is_read_from_the_content_not_the_name(self, manager_task, carol):
        with pytest.raises(InvalidRequest) as refused:
            attachments.attach(
                task_id=manager_task.pk,
                user=carol,
                uploads=[upload("invoice.pdf", EXE)],
                channel="inbox",
            )

        assert "“invoice.pdf” holds application/x-msdownload, whatever its name says" in str(
            refused.value
        )

    def test_a_png_named_pdf_is_kept_as_the_png_it_is(self, manager_task, carol):
        [kept] = attachments.attach(
            task_id=manager_task.pk, user=carol, uploads=[upload("scan.pdf", PNG)], channel="inbox"
        )

        assert kept.content_type == "image/png"

    def test_plain_text_is_accepted(self, manager_task, carol):
        csv = b"date,amount\n2026-12-01,120.00\n"

        [kept] = attachments.attach(
            task_id=manager_task.pk, user=carol, uploads=[upload("costs.csv", csv)], channel="inbox"
        )

        assert kept.content_type == "text/plain"

    def test_a_file_over_the_limit_is_refused_saying_the_limit(self, manager_task, carol, settings):
        settings.BATON_ATTACHMENT_MAX_BYTES = 100

        with pytest.raises(InvalidRequest, match="at most 100 bytes"):
            attachments.attach(
                task_id=manager_task.pk,
                user=carol,
                uploads=[upload("big.pdf", PDF + b" " * 100)],
                channel="inbox",
            )

    def test_one_bad_file_keeps_none_of_them(self, manager_task, carol, media):
        with pytest.raises(InvalidRequest, match="empty"):
            attachments.attach(
                task_id=manager_task.pk,
                user=carol,
                uploads=[upload("good.pdf", PDF), upload("empty.pdf", b"")],
                channel="inbox",
            )

        assert not Attachment.objects.exists()
        assert not any(media.rglob("*")) if media.exists() else True

    def test_a_name_loses_its_folders_and_control_characters(self):
        assert attachments.clean_name("../../etc/pass\x00wd") == "passwd"
        assert attachments.clean_name("C:\\Users\\alice\\receipt.pdf") == "receipt.pdf"
        assert attachments.clean_name(".htaccess") == "htaccess"
        assert attachments.clean_name("") == "attachment"


class TestWhoMayAttachAndSee:
    def test_someone_who_may_not_see_the_task_attaches_nothing(self, manager_task, eve):
        with pytest.raises(Exception, match="No such task"):
            attachments.attach(
                task_id=manager_task.pk, user=eve, uploads=[upload("x.pdf", PDF)], channel="inbox"
            )

        assert not Attachment.objects.exists()

    def test_the_requester_attaches_to_their_request_and_the_reviewer_downloads_it(
        self, client, manager_task, alice, carol
    ):
        [kept] = attachments.attach(
            run_id=manager_task.run_id, user=alice, uploads=[upload("r.pdf", PDF)], channel="inbox"
        )
        client.force_login(carol)

        response = client.get(reverse("requests:attachment", args=[kept.pk]))

        assert response.status_code == 200
        assert b"".join(response.streaming_content) == PDF
        assert response["Content-Disposition"] == 'attachment; filename="r.pdf"'
        assert response["Content-Type"] == "application/pdf"
        assert response["X-Content-Type-Options"] == "nosniff"

    def test_nobody_else_downloads_it(self, client, manager_task, alice, eve):
        [kept] = attachments.attach(
            run_id=manager_task.run_id, user=alice, uploads=[upload("r.pdf", PDF)], channel="inbox"
        )
        client.force_login(eve)

        assert client.get(reverse("requests:attachment", args=[kept.pk])).status_code == 404
        with pytest.raises(RequestNotFound):
            attachments.for_download(attachment_id=kept.pk, user=eve)


class TestOnThePages:
    def test_the_task_page_lists_the_requests_files_and_attaches_more(
        self, client, manager_task, carol
    ):
        client.force_login(carol)

        response = client.post(
            reverse("approvals:attach", args=[manager_task.pk]),
            {"files": [upload("quote.pdf", PDF)]},
            follow=True,
        )

        assert "Attached 1 file." in response.text
        assert "quote.pdf" in response.text

    def test_a_refused_file_is_named_on_the_request_page(self, client, manager_task, alice):
        client.force_login(alice)

        response = client.post(
            reverse("requests:attach", args=[manager_task.run_id]),
            {"files": [upload("virus.pdf", EXE)]},
        )

        assert response.status_code == 422
        assert "“virus.pdf” holds application/x-msdownload" in response.text
        assert not Attachment.objects.exists()

    def test_files_sent_with_the_start_form_are_attached_to_the_new_request(
        self, client, alice, employees
    ):
        client.force_login(alice)
        path = reverse("requests:start", args=["expense"])
        key = client.get(path).context["key"]

        response = client.post(
            path,
            {
                "key": key,
                "requester": "alice",
                "title": "Train to Lyon",
                "amount": "120.00",
                "currency": "EUR",
                "files": [upload("ticket.pdf", PDF)],
            },
        )

        assert response.status_code == 302, response.content
        [kept] = Attachment.objects.all()
        assert kept.name == "ticket.pdf"
        assert kept.uploaded_by == alice

    def test_a_refused_file_on_the_start_form_starts_nothing(self, client, alice, employees):
        from workflows.models import WorkflowRun

        client.force_login(alice)
        path = reverse("requests:start", args=["expense"])
        key = client.get(path).context["key"]

        response = client.post(
            path,
            {
                "key": key,
                "requester": "alice",
                "title": "Train to Lyon",
                "amount": "120.00",
                "currency": "EUR",
                "files": [upload("ticket.pdf", EXE)],
            },
        )

        assert response.status_code == 422
        assert "Choose the files again" in response.text
        assert not WorkflowRun.objects.exists()


class TestTheAuditChainHoldsEachFile:
    def test_verify_audit_passes_while_files_are_as_attached(self, manager_task, carol, capsys):
        attachments.attach(
            task_id=manager_task.pk, user=carol, uploads=[upload("q.pdf", PDF)], channel="inbox"
        )

        call_command("verify_audit")

        assert "intact" in capsys.readouterr().out

    def test_a_file_swapped_in_storage_is_found(self, manager_task, carol):
        [kept] = attachments.attach(
            task_id=manager_task.pk, user=carol, uploads=[upload("q.pdf", PDF)], channel="inbox"
        )
        with open(kept.file.path, "wb") as stored:
            stored.write(PDF.replace(b"Catalog", b"Katalog"))

        with pytest.raises(CommandError, match="was changed in storage since it was attached"):
            call_command("verify_audit")

    def test_a_row_rewritten_to_match_a_swapped_file_is_found_too(self, manager_task, carol):
        [kept] = attachments.attach(
            task_id=manager_task.pk, user=carol, uploads=[upload("q.pdf", PDF)], channel="inbox"
        )
        swapped = PDF.replace(b"Catalog", b"Katalog")
        with open(kept.file.path, "wb") as stored:
            stored.write(swapped)
        Attachment.objects.filter(pk=kept.pk).update(sha256=hashlib.sha256(swapped).hexdigest())

        with pytest.raises(CommandError, match="SHA-256 in its row that the audit chain does not"):
            call_command("verify_audit")


class TestAFormFieldThatRequiresAFile:
    @pytest.fixture
    def pay_task(self, start, drive, people):
        run = drive(start("test_receipt_required", {}))
        return run.human_tasks.get()

    def test_approving_without_the_file_is_refused_naming_the_field(self, pay_task, bob):
        with pytest.raises(InvalidForm, match="Receipt"):
            human_tasks.approve_human_task(
                task_id=pay_task.pk, user=bob, channel="inbox", values={}
            )

    def test_a_file_of_another_request_is_refused(self, pay_task, manager_task, alice, bob):
        [elsewhere] = attachments.attach(
            run_id=manager_task.run_id, user=alice, uploads=[upload("r.pdf", PDF)], channel="inbox"
        )

        with pytest.raises(InvalidForm, match="not a file attached to this request"):
            human_tasks.approve_human_task(
                task_id=pay_task.pk,
                user=bob,
                channel="inbox",
                values={"receipt": str(elsewhere.pk)},
            )

    def test_the_requests_file_is_taken_and_kept_in_the_decision(self, pay_task, bob):
        [receipt] = attachments.attach(
            task_id=pay_task.pk, user=bob, uploads=[upload("r.pdf", PDF)], channel="inbox"
        )

        task = human_tasks.approve_human_task(
            task_id=pay_task.pk, user=bob, channel="inbox", values={"receipt": str(receipt.pk)}
        )

        assert task.form_values["receipt"] == str(receipt.pk)

    def test_the_task_page_offers_the_requests_files_to_choose_from(self, client, pay_task, bob):
        [receipt] = attachments.attach(
            task_id=pay_task.pk, user=bob, uploads=[upload("r.pdf", PDF)], channel="inbox"
        )
        client.force_login(bob)

        page = client.get(reverse("approvals:task", args=[pay_task.pk]))

        assert f'<option value="{receipt.pk}"' in page.text
        approved = client.post(
            reverse("approvals:approve", args=[pay_task.pk]),
            {"version": pay_task.version, "form-receipt": str(receipt.pk)},
            follow=True,
        )
        pay_task.refresh_from_db()
        assert pay_task.state == "completed", approved.text
