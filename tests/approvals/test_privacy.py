"""Personal data: sealed at rest, shown to who may see it, erased everywhere on request,
sealed again under a new key; the audit chain verifies throughout."""

from __future__ import annotations

import base64
from io import StringIO
from typing import Any

import pytest
from auditlog.models import LogEntry
from cryptography.fernet import Fernet
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import salted_hmac
from pydantic import BaseModel, ConfigDict, Field

from approvals import audit, human_tasks, privacy
from approvals.human_tasks import attachments
from approvals.models import Attachment, Comment, HumanTask, InboxEntry, Notification
from workflows import personal, registry
from workflows.activity import ActivityContext
from workflows.apps import MISSING_DATA_KEYS, check_data_keys
from workflows.dsl import ANYONE, Activity, Approval, Workflow
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun
from workflows.personal import PERSONAL, TOMBSTONE
from workflows.states import RunState
from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db

EMAIL = "ada.lovelace@example.com"
IBAN = "DE89370400440532013000"
PAYEE = "Ada King, Countess of Lovelace"
PDF = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


class ClaimInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requester: str
    title: str
    email: str = Field(json_schema_extra=PERSONAL)
    iban: str = Field(default="", json_schema_extra=PERSONAL)


class PayoutForm(BaseModel):
    model_config = ConfigDict(extra="forbid")

    payee: str = Field(json_schema_extra=PERSONAL)
    reference: str = ""


def greet(context: ActivityContext) -> dict[str, Any]:
    # The activity reads the value; what it returns of it, it seals itself.
    return {
        "domain": context.input["email"].split("@")[1],
        "to": personal.seal(context.input["email"]),
    }


CLAIM = Workflow(
    name="privacy_claim",
    version=1,
    input_schema=ClaimInput,
    requester_field="requester",
    starters=ANYONE,
    searchable=("title",),
    start="greet",
    nodes=(
        Activity("greet", run=greet, next="review", mutating=False),
        Approval(
            "review",
            # A title made of a personal value (not advised): erasure finds its copies.
            title=lambda data: f"Claim of {data.input['email']}",
            assignees=("carol",),
            form=PayoutForm,
        ),
    ),
)


@pytest.fixture(autouse=True)
def claim_type():
    registry.register(CLAIM)
    yield CLAIM
    registry.unregister(CLAIM)


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def open_claim(people, start, drive, alice) -> WorkflowRun:
    """alice's claim, waiting for carol's review."""
    run = start(
        "privacy_claim",
        {"requester": "alice", "title": "Conference travel", "email": EMAIL, "iban": IBAN},
        started_by=alice,
    )
    return drive(run)


@pytest.fixture
def finished_claim(open_claim, carol, alice, drive) -> WorkflowRun:
    """alice's claim, with a comment and a receipt, approved by carol with the payee."""
    task = open_claim.human_tasks.get()
    human_tasks.comment_on_human_task(
        task_id=task.pk, user=carol, body="Receipt checked, paying as asked.", channel="inbox"
    )
    attachments.attach(
        run_id=open_claim.pk,
        user=alice,
        uploads=[SimpleUploadedFile("receipt.pdf", PDF, content_type="application/pdf")],
        channel="requests",
    )
    human_tasks.approve_human_task(
        task_id=task.pk,
        user=carol,
        channel="inbox",
        values={"payee": PAYEE, "reference": "R-17"},
        comment="Paid.",
    )
    return drive(open_claim)


def stored_text(run: WorkflowRun) -> str:
    """Every JSON document Baton keeps of `run`, and every audit entry's chained data, as
    the database holds them."""
    tables = {
        "runs": WorkflowRun._meta.db_table,
        "steps": StepRun._meta.db_table,
        "events": StepEvent._meta.db_table,
        "signals": Signal._meta.db_table,
        "tasks": HumanTask._meta.db_table,
        "inbox": InboxEntry._meta.db_table,
        "audit": LogEntry._meta.db_table,
    }
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT concat_ws(' ',
              (SELECT input::text || coalesce(result::text, '') FROM {tables["runs"]}
               WHERE id = %(run)s),
              (SELECT string_agg(coalesce(result::text, ''), ' ') FROM {tables["steps"]}
               WHERE run_id = %(run)s),
              (SELECT string_agg(detail::text, ' ') FROM {tables["events"]}
               WHERE run_id = %(run)s),
              (SELECT string_agg(payload::text, ' ') FROM {tables["signals"]}
               WHERE run_id = %(run)s),
              (SELECT string_agg(form_values::text || changes::text || search_data::text, ' ')
               FROM {tables["tasks"]} WHERE run_id = %(run)s),
              (SELECT string_agg(data::text, ' ') FROM {tables["inbox"]}),
              (SELECT string_agg(coalesce(changes::text, '') || additional_data::text, ' ')
               FROM {tables["audit"]}))
            """,
            {"run": run.pk},
        )
        return cursor.fetchone()[0]


def erase(**options: Any) -> str:
    out = StringIO()
    call_command("erase_personal_data", stdout=out, stderr=out, **options)
    return out.getvalue()


def page_of(run: WorkflowRun, user: Any) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("requests:detail", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def api_run(run: WorkflowRun, user: Any) -> dict[str, Any]:
    _, secret = issue_token(user=user)
    response = Client().get(
        f"/api/v1/workflows/{run.pk}", headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 200, response.content
    return response.json()


class TestSealedAtRest:
    def test_no_document_of_the_run_nor_any_audit_entry_holds_a_personal_value(
        self, finished_claim
    ):
        stored = stored_text(finished_claim)

        assert finished_claim.state == RunState.SUCCEEDED
        for value in (EMAIL, IBAN, PAYEE):
            assert value not in stored
        assert stored.count('"$personal"') >= 4  # input (2), the greet result, the form

    def test_the_activity_and_the_title_read_the_value_itself(self, finished_claim):
        greeted = finished_claim.steps.get(node="greet").result

        assert greeted["domain"] == "example.com"
        assert personal.reveal(greeted["to"]) == EMAIL
        assert finished_claim.human_tasks.get().title == f"Claim of {EMAIL}"

    def test_the_request_page_and_the_api_show_the_values_to_who_may_see_them(
        self, finished_claim, alice
    ):
        page = page_of(finished_claim, alice)
        body = api_run(finished_claim, alice)

        assert EMAIL in page
        assert IBAN in page
        assert PAYEE in page
        assert body["input"]["email"] == EMAIL
        assert body["input"]["iban"] == IBAN

    def test_the_audit_entry_holds_a_keyed_digest_that_matches_the_value(
        self, finished_claim, carol
    ):
        task = finished_claim.human_tasks.get()
        entry = LogEntry.objects.get_for_object(task).get(additional_data__event="approved")
        client = Client()
        client.force_login(carol)

        page = client.get(reverse("approvals:task", args=[task.pk])).content.decode()

        [_, values] = entry.changes["form_values"]
        assert values["payee"] == personal.digest(PAYEE, key=audit.chain_key())
        assert values["reference"] == "R-17"
        assert "form: payee = (personal, kept as a keyed digest), reference = R-17" in page
        assert personal.DIGEST not in page

    def test_the_console_shows_the_operator_the_values_sealed_in_results_too(
        self, finished_claim, console_operator
    ):
        client = Client()
        client.force_login(console_operator)

        page = client.get(f"/console/runs/{finished_claim.pk}/").content.decode()

        assert EMAIL in page  # the input, and the greet step's sealed result
        assert '"$personal"' not in page

    def test_a_type_without_personal_fields_never_reaches_a_key(
        self, settings, start, drive, monkeypatch
    ):
        def no_key() -> None:
            raise AssertionError("a key was read")

        monkeypatch.setattr(personal, "_key_set", no_key)

        run = drive(start("test_linear", {}))

        assert run.state == RunState.SUCCEEDED

    def test_a_type_without_personal_fields_keeps_its_input_as_it_came(self):
        class Plain(BaseModel):
            title: str
            email: str

        plain = Workflow(
            name="plain",
            version=1,
            input_schema=Plain,
            start="greet",
            nodes=(Activity("greet", run=greet, mutating=False),),
        )

        data = plain.validate_input({"title": "T", "email": EMAIL})

        assert data == {"title": "T", "email": EMAIL}
        assert not plain.has_personal_data
        assert personal.reveal_fields(data) is data  # nothing to open: not even a copy

    def test_validating_a_stored_input_again_keeps_its_envelopes(self, open_claim):
        again = CLAIM.validate_input(open_claim.input)

        assert again == open_claim.input


class TestRevisions:
    def test_an_unchanged_personal_value_keeps_its_envelope_and_a_changed_one_is_sealed(
        self, start_expense, carol, alice, drive
    ):
        from approvals.human_tasks import revisions

        run = start_expense(bank_account=IBAN)
        human_tasks.request_changes(
            task_id=run.human_tasks.get().pk, user=carol, channel="inbox", reason="Split it."
        )
        run = drive(run)
        sealed = run.input["bank_account"]
        posted = {**personal.reveal(run.input), "amount": "95.00"}
        posted.pop("requester")

        revisions.resubmit_request(
            task_id=revisions.open_revision(run).pk, user=alice, input=posted, channel="inbox"
        )
        run.refresh_from_db()
        unchanged = run.input["bank_account"]
        answered = run.human_tasks.get(kind="revision")

        assert unchanged == sealed
        assert answered.changes == {"amount": ["120.00", "95.00"]}
        assert IBAN not in stored_text(run)

    def test_a_changed_personal_value_is_kept_sealed_on_both_sides_of_the_change(
        self, start_expense, carol, alice, drive
    ):
        from approvals.human_tasks import revisions

        other = "FR1420041010050500013M02606"
        run = start_expense(bank_account=IBAN)
        human_tasks.request_changes(
            task_id=run.human_tasks.get().pk, user=carol, channel="inbox", reason="Wrong account."
        )
        run = drive(run)
        posted = {**personal.reveal(run.input), "bank_account": other}
        posted.pop("requester")

        revisions.resubmit_request(
            task_id=revisions.open_revision(run).pk, user=alice, input=posted, channel="inbox"
        )
        run.refresh_from_db()
        answered = run.human_tasks.get(kind="revision")

        assert personal.reveal(answered.changes) == {"bank_account": [IBAN, other]}
        assert IBAN not in stored_text(run)
        assert other not in stored_text(run)
        assert other in page_of(run, alice)


class TestKeys:
    def test_without_keys_a_type_with_personal_fields_fails_the_system_check(self, settings):
        settings.BATON_DATA_KEYS = []
        settings.BATON_DATA_KEYS_DERIVED = False

        [error] = check_data_keys()

        assert error.id == MISSING_DATA_KEYS
        assert "BATON_DATA_KEYS is not set" in error.msg
        assert "privacy_claim v1" in error.hint

    def test_without_keys_starting_such_a_run_is_refused_with_what_to_set(
        self, settings, start, alice
    ):
        settings.BATON_DATA_KEYS = []
        settings.BATON_DATA_KEYS_DERIVED = False

        with pytest.raises(Exception, match="Set BATON_DATA_KEYS to a Fernet key"):
            start("privacy_claim", {"requester": "alice", "title": "T", "email": EMAIL})

        assert not WorkflowRun.objects.filter(workflow_type="privacy_claim").exists()

    def test_a_key_that_is_not_a_fernet_key_is_named(self, settings):
        settings.BATON_DATA_KEYS = [Fernet.generate_key().decode(), "not-a-key"]

        [error] = check_data_keys()

        assert "BATON_DATA_KEYS: key 2 is not a Fernet key" in error.msg

    def test_with_keys_the_check_passes(self, settings):
        settings.BATON_DATA_KEYS = [Fernet.generate_key().decode()]
        settings.BATON_DATA_KEYS_DERIVED = False

        assert check_data_keys() == []


class TestRotation:
    def test_a_new_key_first_then_rotate_then_the_old_key_can_go(
        self, settings, people, start, drive, alice, carol
    ):
        old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        settings.BATON_DATA_KEYS = [old]
        run = drive(
            start(
                "privacy_claim",
                {"requester": "alice", "title": "T", "email": EMAIL, "iban": IBAN},
                started_by=alice,
            )
        )
        human_tasks.approve_human_task(
            task_id=run.human_tasks.get().pk, user=carol, channel="inbox", values={"payee": PAYEE}
        )
        before = stored_text(run)
        settings.BATON_DATA_KEYS = [new, old]

        out = StringIO()
        call_command("rotate_data_keys", stdout=out)
        settings.BATON_DATA_KEYS = [new]
        run.refresh_from_db()

        assert "value(s) again under the newest key" in out.getvalue()
        assert stored_text(run) != before
        assert personal.reveal(run.input)["iban"] == IBAN
        assert personal.reveal(HumanTask.objects.get(run=run).form_values)["payee"] == PAYEE
        assert page_of(run, alice).count(EMAIL) >= 1

    def test_rotating_again_writes_nothing(self, settings, finished_claim):
        # The derived key sealed the fixture's values: it stays in the set, after a new one.
        settings.BATON_DATA_KEYS = [Fernet.generate_key().decode(), derived_key(settings)]

        first = privacy.rotate_data_keys()
        second = privacy.rotate_data_keys()

        assert sum(first.values()) >= 4
        assert sum(second.values()) == 0

    def test_a_page_whose_value_no_key_opens_still_answers_and_says_so(
        self, settings, finished_claim, alice
    ):
        settings.BATON_DATA_KEYS = [Fernet.generate_key().decode()]
        settings.BATON_DATA_KEYS_DERIVED = False

        page = page_of(finished_claim, alice)
        body = api_run(finished_claim, alice)

        assert "[unreadable: its key is not in BATON_DATA_KEYS]" in page
        assert body["input"]["email"] == personal.UNREADABLE
        assert body["input"]["title"] == "Conference travel"

    def test_a_value_no_key_opens_is_refused_by_name_not_shown_wrong(self, settings, open_claim):
        settings.BATON_DATA_KEYS = [Fernet.generate_key().decode()]
        settings.BATON_DATA_KEYS_DERIVED = False
        open_claim.refresh_from_db()

        with pytest.raises(personal.UnreadablePersonalData, match="put the old key back"):
            personal.reveal(open_claim.input)


class TestSealingWhatWasStoredInClear:
    def test_values_stored_before_their_field_was_marked_are_sealed_once(self, finished_claim):
        # As a run written before the type marked its fields: every copy in clear.
        WorkflowRun.objects.filter(pk=finished_claim.pk).update(
            input=personal.reveal(finished_claim.input)
        )
        for signal in Signal.objects.filter(run=finished_claim):
            Signal.objects.filter(pk=signal.pk).update(payload=personal.reveal(signal.payload))
        review = finished_claim.steps.get(node="review")
        StepRun.objects.filter(pk=review.pk).update(result=personal.reveal(review.result))
        task = finished_claim.human_tasks.get()
        HumanTask.objects.filter(pk=task.pk).update(form_values=personal.reveal(task.form_values))
        assert EMAIL in stored_text(finished_claim)
        assert PAYEE in stored_text(finished_claim)

        first = privacy.seal_plaintext()
        second = privacy.seal_plaintext()

        finished_claim.refresh_from_db()
        assert all(value not in stored_text(finished_claim) for value in (EMAIL, IBAN, PAYEE))
        assert personal.reveal(finished_claim.input)["email"] == EMAIL
        assert personal.reveal(HumanTask.objects.get(pk=task.pk).form_values)["payee"] == PAYEE
        assert first["WorkflowRun"] == 2
        assert first["HumanTask"] == 1
        assert first["Signal"] >= 1
        assert first["StepRun"] >= 1
        assert sum(second.values()) == 0


def derived_key(settings: Any) -> str:
    """The key BATON_DATA_KEYS_DERIVED uses, as BATON_DATA_KEYS would name it."""
    digest = salted_hmac(
        "baton.personal-data-key", "personal data", secret=settings.SECRET_KEY, algorithm="sha256"
    )
    return base64.urlsafe_b64encode(digest.digest()).decode()


class TestEraseByPerson:
    def test_every_store_holds_the_tombstone_instead(
        self, finished_claim, olga, media, django_capture_on_commit_callbacks
    ):
        receipt = Attachment.objects.get(run=finished_claim)
        stored_file = media / receipt.file.name
        assert stored_file.exists()

        with django_capture_on_commit_callbacks(execute=True):
            said = erase(person="alice", by="olga")

        finished_claim.refresh_from_db()
        task = finished_claim.human_tasks.get()
        assert "Erased" in said
        assert finished_claim.input["email"] == TOMBSTONE
        assert finished_claim.input["iban"] == TOMBSTONE
        assert finished_claim.input["title"] == "Conference travel"  # not personal: kept
        assert finished_claim.steps.get(node="greet").result["to"] == TOMBSTONE
        assert task.form_values == {"payee": TOMBSTONE, "reference": "R-17"}
        assert all(
            TOMBSTONE in str(signal.payload) for signal in Signal.objects.filter(run=finished_claim)
        )
        assert task.title == f"Claim of {TOMBSTONE}"
        assert [comment.body for comment in Comment.objects.filter(task=task)] == [TOMBSTONE] * 2
        assert task.comment == TOMBSTONE
        notices = Notification.objects.filter(task=task) | Notification.objects.filter(
            run=finished_claim
        )
        assert notices.exists()
        assert all(EMAIL not in notice.text for notice in notices)
        receipt.refresh_from_db()
        assert (receipt.name, receipt.file.name) == (TOMBSTONE, "")
        assert not stored_file.exists()

    def test_no_copy_of_a_value_is_left_in_the_database(self, finished_claim, olga):
        erase(person="alice", by="olga")

        with connection.cursor() as cursor:
            for model in (HumanTask, Notification, LogEntry, Comment):
                cursor.execute(f"SELECT t::text FROM {model._meta.db_table} AS t")
                rows = " ".join(row[0] for row in cursor.fetchall())
                for value in (EMAIL, IBAN, PAYEE):
                    assert value not in rows, (model.__name__, value)
        assert all(value not in stored_text(finished_claim) for value in (EMAIL, IBAN, PAYEE))
        with connection.cursor() as cursor:
            for model in (Signal, StepRun, StepEvent, HumanTask, Comment, LogEntry):
                cursor.execute(f"SELECT t::text FROM {model._meta.db_table} AS t")
                rows = " ".join(row[0] for row in cursor.fetchall())
                assert "Receipt checked" not in rows, model.__name__  # comments, whole
                assert "Paid." not in rows, model.__name__  # the decision's reason too

    def test_the_audit_chain_still_verifies_and_says_who_erased(self, finished_claim, olga):
        erase(person="alice", by="olga")
        out = StringIO()

        call_command("verify_audit", stdout=out)

        entry = LogEntry.objects.get(additional_data__event=privacy.ERASED)
        assert "intact" in out.getvalue()
        assert entry.actor == olga
        assert entry.additional_data["comment"] == "for alice"
        assert entry.changes["values"] >= 4
        assert entry.changes["attachments"] == [str(Attachment.objects.get(run=finished_claim).pk)]

    def test_the_page_and_the_api_show_the_tombstone(self, finished_claim, olga, alice):
        erase(person="alice", by="olga")

        page = page_of(finished_claim, alice)
        body = api_run(finished_claim, alice)

        assert TOMBSTONE in page
        assert EMAIL not in page
        assert IBAN not in page
        assert PAYEE not in page
        assert body["input"]["email"] == TOMBSTONE
        file_id = Attachment.objects.get(run=finished_claim).pk
        client = Client()
        client.force_login(alice)
        assert client.get(reverse("requests:attachment", args=[file_id])).status_code == 404

    def test_a_second_erasure_changes_nothing_and_audits_nothing(self, finished_claim, olga):
        erase(person="alice", by="olga")
        entries = LogEntry.objects.count()

        said = erase(person="alice", by="olga")

        assert "Nothing left to erase" in said
        assert LogEntry.objects.count() == entries

    def test_a_live_request_is_left_and_named(self, finished_claim, start, drive, alice, olga):
        live = drive(
            start(
                "privacy_claim",
                {"requester": "alice", "title": "Another", "email": EMAIL},
                started_by=alice,
            )
        )

        said = erase(person="alice", by="olga")

        live.refresh_from_db()
        assert f"Left run {live.pk}: it is still live" in said
        assert personal.reveal(live.input)["email"] == EMAIL

    def test_someone_elses_request_is_not_touched(self, finished_claim, start, drive, bob, olga):
        theirs = start(
            "privacy_claim", {"requester": "bob", "title": "Bob's", "email": "bob@example.com"}
        )

        erase(person="alice", by="olga")

        theirs.refresh_from_db()
        assert personal.reveal(theirs.input)["email"] == "bob@example.com"


class TestEraseByRun:
    def test_only_that_run_is_erased(self, finished_claim, start, drive, alice, carol, olga):
        other = drive(
            start(
                "privacy_claim",
                {"requester": "alice", "title": "Other", "email": EMAIL},
                started_by=alice,
            )
        )
        human_tasks.reject_human_task(
            task_id=other.human_tasks.get().pk, user=carol, channel="inbox", reason="No"
        )
        drive(other)

        erase(run=str(finished_claim.pk), by="olga")

        finished_claim.refresh_from_db()
        other.refresh_from_db()
        assert finished_claim.input["email"] == TOMBSTONE
        assert personal.reveal(other.input)["email"] == EMAIL
        assert other.human_tasks.get().comment == "No"

    def test_a_run_without_personal_fields_loses_its_comments_and_files(
        self, manager_task, carol, olga, drive
    ):
        human_tasks.reject_human_task(
            task_id=manager_task.pk, user=carol, channel="inbox", reason="Missing the receipt"
        )
        drive(manager_task.run)

        erase(run=str(manager_task.run_id), by="olga")

        manager_task.refresh_from_db()
        assert manager_task.comment == TOMBSTONE
        assert LogEntry.objects.filter(additional_data__event=privacy.ERASED).count() == 1


class TestChildRuns:
    def test_a_run_is_erased_with_the_child_runs_it_started(self, workflow_env, olga):
        parent = workflow_env.start("test_parent", {})
        child = WorkflowRun.objects.get(parent_run=parent)
        # The child was given a comment-carrying signal payload, as a decision would be.
        Signal.objects.create(
            run=child,
            name="note",
            signal_id="note-1",
            received_at=timezone.now(),
            payload={"comment": f"for {EMAIL}"},
        )

        said = erase(run=str(parent.pk), by="olga")

        assert parent.state == RunState.SUCCEEDED
        assert Signal.objects.get(run=child).payload == {"comment": TOMBSTONE}
        assert "in 1 run(s)" in said
        assert LogEntry.objects.get(additional_data__event=privacy.ERASED).object_pk == str(
            child.pk
        )


class TestRefusals:
    def test_an_unknown_person_is_refused(self, olga):
        with pytest.raises(CommandError, match="there is no user 'nobody'"):
            erase(person="nobody", by="olga")

    def test_an_unknown_run_is_refused(self, olga):
        with pytest.raises(CommandError, match="there is no run"):
            erase(run="00000000-0000-0000-0000-000000000000", by="olga")

    def test_a_malformed_run_id_is_refused(self, olga):
        with pytest.raises(CommandError, match="'42' is not a run id"):
            erase(run="42", by="olga")

    def test_a_live_run_is_refused_saying_why(self, open_claim, olga):
        with pytest.raises(CommandError, match="is still waiting"):
            erase(run=str(open_claim.pk), by="olga")

        open_claim.refresh_from_db()
        assert personal.reveal(open_claim.input)["email"] == EMAIL

    def test_who_erases_is_required(self, finished_claim):
        with pytest.raises(CommandError, match="Say who you are with --by"):
            erase(person="alice")

    def test_an_unknown_operator_is_refused(self, finished_claim):
        with pytest.raises(CommandError, match="no active user 'mallory'"):
            erase(person="alice", by="mallory")

    def test_person_and_run_are_one_or_the_other(self, finished_claim, olga):
        with pytest.raises(CommandError):
            erase(person="alice", run=str(finished_claim.pk), by="olga")

    def test_a_personal_field_cannot_be_searchable(self):
        from workflows.dsl import check_definition

        bad = Workflow(
            name="bad_privacy",
            version=1,
            input_schema=ClaimInput,
            searchable=("email",),
            requester_field="requester",
            start="greet",
            nodes=(Activity("greet", run=greet, mutating=False),),
        )

        assert (
            "searchable field 'email' is marked personal: a sealed value cannot be searched"
            in check_definition(bad)
        )


class TestTimeNow:
    def test_erasure_runs_with_the_clock_given(self, finished_claim, olga):
        now = timezone.now()

        erasure = privacy.erase_personal_data(person="alice", by="olga", now=now)

        entry = LogEntry.objects.get(additional_data__event=privacy.ERASED)
        assert erasure.runs == [str(finished_claim.pk)]
        assert entry.timestamp == now
