"""Data-entry tasks (`dsl.UserTask`): opened, drafted, completed, on the real engine.

The run is `test_bank_details`: finance types the payee's bank details, then `pay`
reads them. alice asks (the requester), bob and carol are in finance, olga operates.
"""

from __future__ import annotations

import pydantic
import pytest
from django.utils import translation

from approvals import audit
from approvals.human_tasks import (
    ConflictOfDuty,
    InvalidForm,
    InvalidRequest,
    NotAllowed,
    approve_human_task,
    claim_human_task,
    complete_user_task,
    delegate_human_task,
    reassign_human_task,
    save_draft,
)
from approvals.human_tasks.errors import AlreadyDecided
from approvals.states import Channel, Outcome, TaskKind, TaskState
from workflows import personal, registry
from workflows.diagram import draw
from workflows.dsl import Approval, UserTask, Workflow, check_definition
from workflows.models import Signal
from workflows.states import RunState

GOOD = {"account_holder": "Alice Archer", "iban": "DE89370400440532013000"}


@pytest.fixture
def bank_run(workflow_env, people):
    return workflow_env.start("test_bank_details", {"requester": "alice", "amount": "120.00"})


class TestOpening:
    def test_the_run_waits_for_a_data_entry_task_in_the_finance_queue(self, workflow_env, bank_run):
        task = workflow_env.task(bank_run, "collect_bank_details")

        assert workflow_env.refresh(bank_run).state == RunState.WAITING
        assert task.kind == TaskKind.ENTRY
        assert task.state == TaskState.OPEN
        assert [group.name for group in task.candidate_groups.all()] == ["finance"]


class TestCompleting:
    def test_the_values_flow_into_the_runs_data_and_the_next_step_reads_them(
        self, workflow_env, bank_run, bob
    ):
        run = workflow_env.complete(bank_run, "collect_bank_details", as_user=bob, values=GOOD)

        workflow_env.assert_state(run, RunState.SUCCEEDED)
        workflow_env.assert_path(run, "collect_bank_details", "pay")
        assert run.results["collect_bank_details"]["payload"]["values"] == {**GOOD, "reference": ""}
        assert run.results["pay"]["iban"] == GOOD["iban"]

    def test_the_task_keeps_the_values_and_the_audit_names_who_completed_it(
        self, workflow_env, bank_run, bob
    ):
        workflow_env.complete(
            bank_run, "collect_bank_details", as_user=bob, values=GOOD, comment="from the invoice"
        )

        task = bank_run.human_tasks.get()
        assert (task.state, task.outcome, task.decided_by) == (
            TaskState.COMPLETED,
            Outcome.COMPLETED,
            bob,
        )
        assert task.form_values["iban"] == GOOD["iban"]
        last = audit.trail(task)[-1]
        assert last.additional_data["event"] == "completed"
        assert last.changes["form_values"][1]["iban"] == GOOD["iban"]

    def test_invalid_values_name_each_field_and_complete_nothing(self, workflow_env, bank_run, bob):
        task = workflow_env.task(bank_run, "collect_bank_details")

        with pytest.raises(InvalidForm) as refused:
            complete_user_task(
                task_id=task.pk,
                user=bob,
                channel=Channel.API,
                values={"account_holder": "", "iban": "not an iban"},
            )

        assert sorted(error["field"] for error in refused.value.errors) == [
            "account_holder",
            "iban",
        ]
        assert "Nothing was completed" in str(refused.value)
        task.refresh_from_db()
        assert task.state == TaskState.OPEN
        assert not Signal.objects.filter(run=bank_run).exists()

    def test_a_second_completion_is_refused_and_names_the_first(self, workflow_env, bank_run, bob):
        task = workflow_env.task(bank_run, "collect_bank_details")
        workflow_env.complete(bank_run, "collect_bank_details", as_user=bob, values=GOOD)

        with pytest.raises(AlreadyDecided, match="already completed by Bob"):
            complete_user_task(task_id=task.pk, user=bob, channel=Channel.API, values=GOOD)

    def test_it_cannot_be_approved_or_rejected(self, workflow_env, bank_run, bob):
        task = workflow_env.task(bank_run, "collect_bank_details")

        with pytest.raises(NotAllowed, match="filled in and completed"):
            approve_human_task(task_id=task.pk, user=bob, channel=Channel.API, values=GOOD)

    def test_an_approval_cannot_be_completed(self, workflow_env, people, bob):
        run = workflow_env.start("test_receipt_required", {})
        task = workflow_env.task(run, "pay")

        with pytest.raises(NotAllowed, match="approved or rejected"):
            complete_user_task(task_id=task.pk, user=bob, channel=Channel.API, values={})


class TestSeparationOfDuties:
    def test_the_requester_cannot_complete_a_task_of_their_own_request(
        self, workflow_env, bank_run, alice, groups
    ):
        alice.groups.add(groups["finance"])
        task = workflow_env.task(bank_run, "collect_bank_details")

        with pytest.raises(ConflictOfDuty, match="You requested this test bank details"):
            complete_user_task(task_id=task.pk, user=alice, channel=Channel.INBOX, values=GOOD)
        with pytest.raises(ConflictOfDuty):
            save_draft(task_id=task.pk, user=alice, channel=Channel.INBOX, values=GOOD)

    def test_nor_may_an_operator_who_asked_for_it(self, workflow_env, people, olga):
        run = workflow_env.start("test_bank_details", {"requester": "olga", "amount": "1"})
        task = workflow_env.task(run, "collect_bank_details")

        with pytest.raises(ConflictOfDuty):
            complete_user_task(task_id=task.pk, user=olga, channel=Channel.INBOX, values=GOOD)

    def test_someone_outside_finance_may_not(self, workflow_env, bank_run, eve):
        task = workflow_env.task(bank_run, "collect_bank_details")

        with pytest.raises(Exception, match="No such task"):
            complete_user_task(task_id=task.pk, user=eve, channel=Channel.INBOX, values=GOOD)


class TestClaimDelegateReassign:
    def test_once_claimed_only_its_holder_completes_it(self, workflow_env, bank_run, bob, carol):
        task = workflow_env.task(bank_run, "collect_bank_details")
        claim_human_task(task_id=task.pk, user=bob, channel=Channel.INBOX)

        with pytest.raises(NotAllowed):
            complete_user_task(task_id=task.pk, user=carol, channel=Channel.INBOX, values=GOOD)
        run = workflow_env.complete(bank_run, "collect_bank_details", as_user=bob, values=GOOD)

        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_a_delegate_completes_it_and_the_owner_stays_named(
        self, workflow_env, bank_run, bob, carol
    ):
        task = workflow_env.task(bank_run, "collect_bank_details")
        claim_human_task(task_id=task.pk, user=carol, channel=Channel.INBOX)
        delegate_human_task(task_id=task.pk, user=carol, to_username="bob", channel=Channel.INBOX)

        run = workflow_env.complete(bank_run, "collect_bank_details", as_user=bob, values=GOOD)

        task.refresh_from_db()
        assert (task.decided_by, task.owner) == (bob, carol)
        workflow_env.assert_state(run, RunState.SUCCEEDED)

    def test_it_cannot_be_reassigned_to_its_requester(self, workflow_env, bank_run, carol):
        task = workflow_env.task(bank_run, "collect_bank_details")

        with pytest.raises(ConflictOfDuty, match="nobody decides their own request"):
            reassign_human_task(
                task_id=task.pk, user=carol, to_username="alice", channel=Channel.INBOX
            )


class TestDrafts:
    def test_a_draft_is_kept_on_the_task_without_changing_its_state_or_version(
        self, workflow_env, bank_run, bob
    ):
        before = workflow_env.task(bank_run, "collect_bank_details")

        task = workflow_env.save_draft(
            bank_run, "collect_bank_details", as_user=bob, values={"iban": "DE89 half"}
        )

        task.refresh_from_db()
        assert task.draft == {"iban": "DE89 half"}
        assert (task.draft_saved_by, task.state, task.version) == (
            bob,
            before.state,
            before.version,
        )

    def test_it_is_audited_once_per_person_without_its_values(self, workflow_env, bank_run, bob):
        for typed in ("D", "DE", "DE8"):
            task = workflow_env.save_draft(
                bank_run, "collect_bank_details", as_user=bob, values={"iban": typed}
            )

        events = [entry.additional_data["event"] for entry in audit.trail(task)]
        assert events.count("draft_started") == 1
        assert "DE8" not in str([entry.changes for entry in audit.trail(task)])

    def test_a_field_the_form_does_not_have_is_refused(self, workflow_env, bank_run, bob):
        with pytest.raises(InvalidRequest, match="has no field 'swift'"):
            workflow_env.save_draft(
                bank_run, "collect_bank_details", as_user=bob, values={"swift": "X"}
            )

    def test_a_huge_draft_is_refused(self, workflow_env, bank_run, bob):
        with pytest.raises(InvalidRequest, match="at most 32768"):
            workflow_env.save_draft(
                bank_run, "collect_bank_details", as_user=bob, values={"reference": "x" * 40000}
            )

    def test_a_refused_completion_leaves_the_draft_as_it_was_and_success_empties_it(
        self, workflow_env, bank_run, bob
    ):
        workflow_env.save_draft(bank_run, "collect_bank_details", as_user=bob, values=GOOD)
        task = workflow_env.task(bank_run, "collect_bank_details")
        with pytest.raises(InvalidForm):
            complete_user_task(
                task_id=task.pk, user=bob, channel=Channel.INBOX, values={"iban": "x"}
            )
        task.refresh_from_db()
        assert task.draft == GOOD

        workflow_env.complete(bank_run, "collect_bank_details", as_user=bob, values=GOOD)

        task.refresh_from_db()
        assert task.draft == {}


class Form(pydantic.BaseModel):
    code: str


class PrivateDetails(pydantic.BaseModel):
    holder: str = pydantic.Field(min_length=1, json_schema_extra=personal.PERSONAL)
    note: str = ""


PRIVATE = Workflow(
    name="test_private_entry",
    version=1,
    start="enter",
    nodes=(UserTask("enter", title="Private details", groups=("finance",), form=PrivateDetails),),
)


class TestPersonalFieldsInADraft:
    @pytest.fixture(autouse=True)
    def private(self):
        registry.register(PRIVATE)
        yield
        registry.unregister(PRIVATE)

    def test_a_personal_field_is_sealed_at_rest_and_shown_to_who_may_see_it(
        self, workflow_env, people, bob
    ):
        run = workflow_env.start("test_private_entry", {})

        task = workflow_env.save_draft(
            run, "enter", as_user=bob, values={"holder": "Ada Lovelace", "note": "n"}
        )

        task.refresh_from_db()
        assert personal.is_sealed(task.draft["holder"])
        assert task.draft["note"] == "n"
        assert personal.shown(task.draft) == {"holder": "Ada Lovelace", "note": "n"}
        assert "Ada Lovelace" not in str(task.draft)


class TestTheStaticCheck:
    def check(self, node: UserTask) -> list[str]:
        return check_definition(Workflow(name="x", version=1, start=node.name, nodes=(node,)))

    def test_a_user_task_with_a_form_passes(self):
        assert self.check(UserTask("enter", form=Form, groups=("finance",))) == []

    def test_a_user_task_needs_a_form(self):
        assert self.check(UserTask("enter")) == [
            "user task 'enter' has no form: give the pydantic model it fills in "
            "(an approval is the node for a decision without values)"
        ]

    def test_it_takes_none_of_an_approvals_decisions(self):
        problems = self.check(
            UserTask("enter", form=Form, on_reject="enter", on_deadline="reject", required=2)
        )

        assert problems == [
            "user task 'enter' has required=2: one person completes it",
            "user task 'enter' has on_reject='enter': it is completed, never approved, "
            "rejected or sent back; say where it goes with next=",
            "user task 'enter' has on_deadline='reject': choose 'fail' or 'keep_waiting' "
            "(nobody rejects a data-entry task)",
        ]

    def test_its_completion_is_reserved_to_its_task(self):
        node = UserTask("enter", form=Form, next=None)

        assert node.signals == {"enter.completed": None}
        assert isinstance(node, Approval)


class TestWhereItWaits:
    def test_the_request_page_says_who_fills_in_the_form(self, workflow_env, bank_run):
        from approvals import request_pages

        run = workflow_env.refresh(bank_run)

        (where,) = request_pages.positions(run, run.steps.all(), run.human_tasks.all())
        assert (where.stage, where.waiting_for) == (
            "collect bank details",
            "the finance group to fill in its form",
        )


class TestThePicture:
    def test_it_draws_the_user_task_with_what_it_asks_for(self, workflow_env, bank_run):
        definition = registry.get("test_bank_details")

        diagram = draw(definition, bank_run.steps.all())

        box = next(box for box in diagram.boxes if box.name == "collect_bank_details")
        assert (box.kind, box.note, box.current) == ("usertask", "fill in: BankDetails", True)

    def test_it_says_what_it_asks_for_in_the_readers_language(self, workflow_env, bank_run):
        definition = registry.get("test_bank_details")

        with translation.override("de"):
            diagram = draw(definition, bank_run.steps.all())

        box = next(box for box in diagram.boxes if box.name == "collect_bank_details")
        assert box.note == "auszufüllen: BankDetails"
