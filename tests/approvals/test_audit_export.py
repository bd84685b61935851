"""The audit export: `manage.py export_audit` and the console's download stream entries with
their chain values, and `python -m approvals.audit.verify_export` checks a file offline,
naming the first entry that no longer holds."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import audit, human_tasks
from approvals.audit import verify_export
from approvals.audit.hashing import ERASED_COMMENT
from approvals.models import AuditCheckpoint
from approvals.states import Channel

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
KEY = "the-auditors-copy-of-BATON_AUDIT_KEY"
JANUARY = datetime(2025, 1, 10, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def keyfile(settings, tmp_path) -> Path:
    """The audit key in force, and the auditor's copy of it (with a final newline)."""
    settings.BATON_AUDIT_KEY = KEY
    path = tmp_path / "audit.key"
    path.write_text(KEY + "\n")
    return path


@pytest.fixture
def history(manager_task, carol, olga, eve, start, order_input):
    """carol comments on and approves alice's expense; olga retries an order run (another
    type) on the console; eve's account is locked out (about no run)."""
    human_tasks.comment_on_human_task(
        task_id=manager_task.pk,
        user=carol,
        body='=HYPERLINK("http://evil.example")',  # a formula, harmless in the file
        channel=Channel.INBOX,
        remote_addr="10.0.0.7",
    )
    human_tasks.approve_human_task(
        task_id=manager_task.pk, user=carol, channel=Channel.API, comment="ok, “fine”\nreally"
    )
    order = start("order", order_input())
    audit.record(task=order, event="retried", actor=olga, channel="console", now=timezone.now())
    audit.record_lockout(
        subject=eve,
        description="eve",
        channel="inbox",
        now=timezone.now(),
        comment="5 failed sign-ins",
        remote_addr="203.0.113.7",
        changes={"failures": 5},
    )
    return manager_task


def export(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("export_audit", *args, stdout=out, stderr=err)
    return out.getvalue()


def verify(text: str, keyfile: Path, tmp_path: Path, capsys) -> tuple[int, str]:
    """Run the verifier's command line on `text`; return its exit status and what it said."""
    path = tmp_path / "export.txt"
    path.write_bytes(text.encode())
    capsys.readouterr()
    code = verify_export.main([str(path), str(keyfile)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def lines_of(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def entry_ids(text: str) -> list[int]:
    if text.startswith("{"):
        records = [json.loads(line) for line in text.splitlines()]
        return [r["id"] for r in records if r["record"] == "entry"]
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    return [int(row["id"]) for row in rows if row["record"] == "entry"]


FORMATS = pytest.mark.parametrize("format", ["csv", "ndjson"])


class TestRoundTrip:
    @FORMATS
    def test_an_export_of_the_whole_log_verifies_with_the_key(
        self, history, keyfile, tmp_path, capsys, format
    ):
        text = export("--format", format)

        code, said = verify(text, keyfile, tmp_path, capsys)

        assert code == 0, said
        assert "The audit export verifies" in said
        assert f"{LogEntry.objects.count()} entries" in said
        assert "The file holds the whole chain, from its first entry to the checkpoint's." in said

    @FORMATS
    def test_each_entry_carries_its_chain_values_and_what_they_cover(self, history, format):
        text = export("--format", format)

        newest = LogEntry.objects.order_by("-id").first()
        assert entry_ids(text) == list(LogEntry.objects.order_by("id").values_list("id", flat=True))
        assert newest.additional_data["chain"]["hash"] in text
        assert newest.additional_data["chain"]["previous"] in text
        assert "203.0.113.7" in text

    def test_the_export_starts_with_a_new_checkpoint_of_the_head_when_none_names_it(self, history):
        text = export("--format", "ndjson")

        header = json.loads(text.splitlines()[0])
        checkpoint = AuditCheckpoint.objects.get()
        head = LogEntry.objects.order_by("id").last()
        assert header["checkpoint"]["entry"] == checkpoint.entry_id == head.pk
        assert header["anchor"]["hash"] == checkpoint.head

    def test_the_newest_checkpoint_is_reused_when_it_names_the_head(self, history):
        audit.write_checkpoint(now=timezone.now())

        export("--format", "ndjson")

        assert AuditCheckpoint.objects.count() == 1

    def test_a_spreadsheet_formula_in_a_comment_is_written_as_text(self, history):
        text = export("--format", "csv")

        comments = [row["comment"] for row in csv.DictReader(io.StringIO(text, newline=""))]
        assert '\'=HYPERLINK("http://evil.example")' in comments

    def test_the_verifier_runs_with_python_alone_without_django(self, history, keyfile, tmp_path):
        path = tmp_path / "export.csv"
        path.write_text(export("--format", "csv"), newline="")

        # -S: no site-packages, so no Django; the package comes from the checkout.
        result = subprocess.run(
            [sys.executable, "-S", "-m", "approvals.audit.verify_export", str(path), str(keyfile)],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

        assert result.returncode == 0, result.stderr
        assert "The audit export verifies (csv, format 1)." in result.stdout

    def test_an_empty_log_exports_a_file_that_verifies_as_empty(self, keyfile, tmp_path, capsys):
        code, said = verify(export("--format", "ndjson"), keyfile, tmp_path, capsys)

        assert code == 0, said
        assert "No entry matched the filters." in said


class TestAfterErasure:
    @FORMATS
    def test_an_export_with_erased_comments_still_verifies_and_holds_no_words(
        self, history, keyfile, tmp_path, capsys, format
    ):
        for entry in LogEntry.objects.filter(additional_data__has_key="comment_digest"):
            entry.additional_data["comment"] = ERASED_COMMENT
            LogEntry.objects.filter(pk=entry.pk).update(additional_data=entry.additional_data)

        text = export("--format", format)
        code, said = verify(text, keyfile, tmp_path, capsys)

        assert code == 0, said
        assert "fine" not in text
        assert ERASED_COMMENT in text


class TestTamperedExports:
    @FORMATS
    def test_a_changed_comment_fails_naming_its_entry(
        self, history, keyfile, tmp_path, capsys, format
    ):
        text = export("--format", format)
        approved = LogEntry.objects.get(additional_data__event="approved")

        code, said = verify(text.replace("ok, “fine”", "rejected"), keyfile, tmp_path, capsys)

        assert code == 1
        assert f"FAILED: Entry {approved.pk} (line " in said
        assert "approved on" in said
        assert "does not match its chain hash" in said

    @FORMATS
    def test_a_removed_line_fails_naming_the_entry_after_it(
        self, history, keyfile, tmp_path, capsys, format
    ):
        text = export("--format", format)
        ids = entry_ids(text)
        records = lines_of(text) if format == "ndjson" else None
        if format == "ndjson":
            tampered = "".join(line for line in records if f'"id": {ids[1]},' not in line)
        else:
            rows = list(csv.reader(io.StringIO(text, newline="")))
            kept = [row for row in rows if row[1] != str(ids[1])]
            buffer = io.StringIO()
            csv.writer(buffer, lineterminator="\r\n").writerows(kept)
            tampered = buffer.getvalue()

        code, said = verify(tampered, keyfile, tmp_path, capsys)

        assert code == 1
        assert f"FAILED: Entry {ids[2]} (line " in said

    def test_a_removed_line_of_a_filtered_export_fails_too(
        self, history, keyfile, tmp_path, capsys
    ):
        text = export("--format", "ndjson", "--type", "expense")
        records = lines_of(text)

        code, said = verify("".join(records[:2] + records[3:]), keyfile, tmp_path, capsys)

        assert code == 1
        assert "breaks the export's seal: a line before it was removed" in said

    @FORMATS
    def test_a_file_cut_short_fails(self, history, keyfile, tmp_path, capsys, format):
        text = export("--format", format)

        code, said = verify("".join(lines_of(text)[:-1]), keyfile, tmp_path, capsys)

        assert code == 1
        assert "without its end record: it was cut short" in said

    @FORMATS
    def test_the_wrong_key_fails_saying_so(self, history, tmp_path, capsys, format):
        text = export("--format", format)
        wrong = tmp_path / "wrong.key"
        wrong.write_text("someone-elses-key")

        code, said = verify(text, wrong, tmp_path, capsys)

        assert code == 1
        assert "is not signed with this key: the key is wrong" in said

    def test_a_changed_label_outside_the_chain_hash_breaks_the_seal(
        self, history, keyfile, tmp_path, capsys
    ):
        text = export("--format", "ndjson")
        renamed = text.replace('"actor_username": "carol"', '"actor_username": "mallory"')

        code, said = verify(renamed, keyfile, tmp_path, capsys)

        assert code == 1
        assert "breaks the export's seal" in said

    def test_an_added_line_after_the_end_fails(self, history, keyfile, tmp_path, capsys):
        text = export("--format", "ndjson")
        records = lines_of(text)

        code, said = verify(text + records[1], keyfile, tmp_path, capsys)

        assert code == 1
        assert f"Line {len(records) + 1} follows the end record" in said

    def test_an_entry_deleted_from_the_log_before_the_last_checkpoint_is_named(
        self, history, keyfile, tmp_path, capsys
    ):
        audit.write_checkpoint(now=timezone.now())
        ids = list(LogEntry.objects.order_by("id").values_list("id", flat=True))
        LogEntry.objects.filter(pk=ids[1]).delete()

        code, said = verify(export("--format", "ndjson"), keyfile, tmp_path, capsys)

        assert code == 1
        assert f"Entry {ids[2]} (line " in said
        assert "does not follow entry" in said

    def test_a_log_broken_since_the_last_checkpoint_is_not_exported(self, history, tmp_path):
        LogEntry.objects.filter(additional_data__event="commented").delete()

        with pytest.raises(CommandError, match=r"Nothing was exported\. Audit entry"):
            export("--output", str(tmp_path / "out.csv"))

        assert not (tmp_path / "out.csv").exists()


class TestFilters:
    def test_the_type_selects_entries_of_its_runs_and_their_human_tasks(self, history):
        text = export("--format", "ndjson", "--type", "expense")

        events = [json.loads(line).get("event") for line in text.splitlines() if '"entry"' in line]
        assert "retried" not in events
        assert "locked_out" not in events
        assert {"commented", "approved"} <= set(events)
        assert all(
            json.loads(line)["workflow_type"] == "expense"
            for line in text.splitlines()
            if '"record": "entry"' in line
        )

    def test_a_filtered_export_verifies_and_counts_its_gaps(
        self, history, keyfile, tmp_path, capsys
    ):
        code, said = verify(export("--type", "order"), keyfile, tmp_path, capsys)

        assert code == 0, said
        assert "Filters: type order." in said
        assert "1 follow a gap where the filters left entries out" in said

    def test_from_is_included_and_to_is_not(self, manager_task, carol):
        for day in (9, 10, 11):
            audit.record(
                task=manager_task,
                event="reminded",
                actor=carol,
                channel="system",
                now=JANUARY.replace(day=day),
            )

        text = export("--format", "ndjson", "--from", "2025-01-10", "--to", "2025-01-11")

        stamps = [
            json.loads(line)["timestamp"]
            for line in text.splitlines()
            if '"record": "entry"' in line
        ]
        assert stamps == [JANUARY.isoformat()]

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--from", "2025-13-01"], "“from” is '2025-13-01': give a date (2025-01-31)"),
            (["--to", "yesterday"], "“to” is 'yesterday': give a date"),
            (["--from", "2025-02-01", "--to", "2025-01-01"], "“from” (2025-02-01T00:00:00"),
            (["--format", "xml"], "invalid choice: 'xml'"),
        ],
    )
    def test_a_bad_value_is_refused_with_a_clear_message(self, history, args, message):
        with pytest.raises(CommandError) as refused:
            export(*args)

        assert message in str(refused.value)
        assert AuditCheckpoint.objects.count() == 0

    def test_a_date_and_time_with_an_offset_is_taken_as_given(self):
        filters = audit.ExportFilters.parse(
            start="2025-01-10T10:00+01:00", end=None, workflow_type=None
        )

        assert filters.start == JANUARY


class TestStreaming:
    def test_entries_are_read_a_page_per_query_as_the_file_is_written(self, manager_task, carol):
        for minutes in range(9):
            audit.record(
                task=manager_task,
                event="reminded",
                actor=carol,
                channel="system",
                now=JANUARY + timedelta(minutes=minutes),
            )
        entries = LogEntry.objects.count()  # 10 with the task's creation
        export = audit.start_export(
            filters=audit.ExportFilters(), format="csv", now=timezone.now(), chunk_size=3
        )
        chunks = export.chunks()

        with CaptureQueriesContext(connection) as queries:
            header = next(chunks)
            before_pages = len(queries)
            pages = [next(chunks) for _ in range(4)]
            end = next(chunks)

        assert header.startswith("record,id,")
        assert [page.count("\r\nentry,") + page.startswith("entry,") for page in pages] == [
            3,
            3,
            3,
            1,
        ]
        assert len(queries) - before_pages == 4  # one query per page of entries
        assert end.startswith("end,")
        assert export.entries == entries

    def test_the_output_file_appears_whole(self, history, keyfile, tmp_path, capsys):
        path = tmp_path / "audit.ndjson"

        export("--format", "ndjson", "--output", str(path))

        assert not path.with_name("audit.ndjson.partial").exists()
        code, said = verify(path.read_text(), keyfile, tmp_path, capsys)
        assert code == 0, said


@pytest.fixture
def console_operator(operator) -> User:
    operator.is_staff = True
    operator.save()
    return User.objects.get(pk=operator.pk)


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


class TestConsoleDownload:
    def test_an_operator_sees_the_form(self, console_operator):
        response = signed_in(console_operator).get("/console/audit/")

        assert response.status_code == 200
        assert "Export the audit log" in response.text
        assert "python -m approvals.audit.verify_export" in response.text

    @FORMATS
    def test_an_operator_downloads_a_streamed_attachment_that_verifies(
        self, history, console_operator, keyfile, tmp_path, capsys, format
    ):
        response = signed_in(console_operator).post(
            "/console/audit/", {"format": format, "type": "expense"}
        )

        assert response.status_code == 200
        assert isinstance(response, StreamingHttpResponse)
        assert response["Content-Disposition"].startswith('attachment; filename="baton-audit-')
        assert response["Content-Disposition"].endswith(f'.{format}"')
        text = b"".join(response.streaming_content).decode()
        code, said = verify(text, keyfile, tmp_path, capsys)
        assert code == 0, said
        assert "Filters: type expense." in said

    def test_a_reviewer_is_refused_saying_it_is_for_operators(self, history, alice):
        response = signed_in(alice).post("/console/audit/", {"format": "csv"})

        assert response.status_code == 403
        assert "The run console is for operators (staff) only." in response.text
        assert AuditCheckpoint.objects.count() == 0

    def test_staff_who_may_only_view_runs_are_refused_saying_why(self, history):
        viewer = User.objects.create_user("vic", is_staff=True)
        viewer.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))

        response = signed_in(viewer).post("/console/audit/", {"format": "csv"})

        assert response.status_code == 403
        assert "Only operators may download the audit log" in response.text

    def test_a_bad_value_answers_400_with_the_form_and_the_reason(self, history, console_operator):
        response = signed_in(console_operator).post(
            "/console/audit/", {"from": "31/01/2025", "format": "csv"}
        )

        assert response.status_code == 400
        assert "“from” is &#x27;31/01/2025&#x27;: give a date" in response.text
        assert 'value="31/01/2025"' in response.text
        assert AuditCheckpoint.objects.count() == 0

    def test_an_unknown_format_answers_400(self, history, console_operator):
        response = signed_in(console_operator).post("/console/audit/", {"format": "xlsx"})

        assert response.status_code == 400
        assert "choose csv or ndjson" in response.text
