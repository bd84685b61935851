"""Personal data at rest, for a privacy officer: erase a person's or a run's, re-key what is sealed.

`erase_personal_data` replaces the personal values of finished runs with the tombstone
everywhere Baton keeps them: the sealed envelopes (workflows.personal) in the run's
input and result, its steps' results, its timeline, its signals, its tasks' form
values and changes, its inbox rows; copies of those values in derived text (task and
inbox titles, notifications still to be emailed or not, webhook deliveries, audit
entries' labels); its comments and decision reasons; and its attached files. Audit
entries hold keyed digests of personal values, never the values (approvals.audit), so
the chain is untouched and still verifies; the erasure itself is one chained
`personal_data_erased` entry per run.

`rotate_data_keys` seals every envelope again under the newest of BATON_DATA_KEYS,
so an older key can leave the set; `seal_plaintext` seals the values of marked fields
that were stored in clear, before their type marked them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from auditlog.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.files.storage import default_storage
from django.db import models, transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from approvals import audit
from approvals.audit.hashing import ERASED_COMMENT
from approvals.models import (
    Attachment,
    Comment,
    HumanTask,
    InboxEntry,
    Notification,
    WebhookDelivery,
)
from workflows import personal, registry
from workflows.dsl import Approval
from workflows.models import Signal, StepEvent, StepRun, WorkflowRun
from workflows.states import FINAL_RUN_STATES

ERASED = "personal_data_erased"
# Values shorter than this are not looked for in derived text: "DE" or "1" would
# tombstone half of every title.
_SHORTEST_COPY = 3


class ErasureRefused(Exception):
    """Nothing was erased: the person or run is unknown, or the run is still live."""


@dataclass
class Erasure:
    """What one erasure did: the runs it reached, those left because they are live, and
    how many values and rows it replaced, by store."""

    runs: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    values: int = 0
    rows: dict[str, int] = field(default_factory=dict)

    def count(self, store: str, rows: int = 1) -> None:
        if rows:
            self.rows[store] = self.rows.get(store, 0) + rows


def erase_personal_data(
    *, person: str | None = None, run_id: str | None = None, by: str, now: datetime
) -> Erasure:
    """Erase the personal data of `person`'s finished requests (the runs they started or
    that name them as requester), or of the finished run `run_id`; `by` is the operator's
    username, for the audit chain. Safe to run again: what is erased stays so, and a run
    with nothing left to erase is not touched nor audited again."""
    if (person is None) == (run_id is None):
        raise ErasureRefused("Say whose data to erase: --person USERNAME or --run RUN_ID.")
    actor = _operator(by)
    if run_id is not None:
        run = _run(run_id)
        if run.state not in FINAL_RUN_STATES:
            raise ErasureRefused(
                f"Run {run.pk} is still {run.state}: its activities may need its data. "
                "Cancel it, or erase it once it has ended."
            )
        runs = [run]
    else:
        runs = list(_requests_of(_person(person)))
    erasure = Erasure()
    for run in _with_children(runs):
        with transaction.atomic():
            _erase_run(run.pk, erasure, actor=actor, reason=person or "", now=now)
    return erasure


def _with_children(runs: list[WorkflowRun]) -> list[WorkflowRun]:
    """`runs` and the child runs they started, however deep (their inputs came from the
    parent's data), parents first."""
    found = list(runs)
    seen = {run.pk for run in runs}
    parents = list(seen)
    while parents:
        children = [
            child
            for child in WorkflowRun.objects.filter(parent_run_id__in=parents).order_by(
                "created_at"
            )
            if child.pk not in seen
        ]
        found.extend(children)
        seen.update(child.pk for child in children)
        parents = [child.pk for child in children]
    return found


def _operator(username: str) -> Any:
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise ErasureRefused(f"Nothing was erased: no active user {username!r} (--by).")
    return user


def _person(username: str | None) -> Any:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ErasureRefused(f"Nothing was erased: there is no user {username!r}.")
    return user


def _run(run_id: str) -> WorkflowRun:
    try:
        key = uuid.UUID(str(run_id))
    except ValueError:
        raise ErasureRefused(f"Nothing was erased: {run_id!r} is not a run id.") from None
    run = WorkflowRun.objects.filter(pk=key).first()
    if run is None:
        raise ErasureRefused(f"Nothing was erased: there is no run {run_id}.")
    return run


def _requests_of(user: Any) -> Iterator[WorkflowRun]:
    """The runs `user` started, and those whose type's requester field names them."""
    found = Q(started_by=user)
    for name, field_name in _requester_fields().items():
        found |= Q(workflow_type=name, input__contains={field_name: user.get_username()})
    return WorkflowRun.objects.filter(found).order_by("created_at").iterator()


def _requester_fields() -> dict[str, str]:
    fields: dict[str, str] = {}
    for definition in registry.all_definitions():
        if definition.requester_field:
            fields[definition.name] = definition.requester_field
    return fields


# ---------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------


def _erase_run(run_id: Any, erasure: Erasure, *, actor: Any, reason: str, now: datetime) -> None:
    run = WorkflowRun.objects.select_for_update().get(pk=run_id)
    if run.state not in FINAL_RUN_STATES:  # under the lock: no retry revives it meanwhile
        erasure.live.append(str(run.pk))
        return
    before = dict(erasure.rows)
    values_before = erasure.values
    found: list[Any] = []
    task_ids = list(HumanTask.objects.filter(run=run).values_list("pk", flat=True))
    for store, rows, columns in _sealed_stores(run.pk, task_ids):
        for row in rows.select_for_update():
            changed = []
            for column in columns:
                value, count = personal.erase(getattr(row, column), found=found)
                erasure.values += count
                if store in _CARRYING_COMMENTS:
                    value, said = _without_comments(value)
                    count += said
                if count:
                    setattr(row, column, value)
                    changed.append(column)
            if changed:
                type(row).objects.filter(pk=row.pk).update(
                    **{column: getattr(row, column) for column in changed}
                )
                erasure.count(store)
    copies = _copies(found)
    _erase_text(run.pk, task_ids, copies, erasure)
    attachments = _erase_attachments(run.pk, erasure)
    if erasure.rows == before:
        return  # nothing was left to erase: no second audit entry
    delta = {
        store: rows - before.get(store, 0)
        for store, rows in erasure.rows.items()
        if rows != before.get(store, 0)
    }
    audit.record_erasure(
        run=run,
        actor=actor,
        now=now,
        comment=f"for {reason}" if reason else "by run",
        changes={
            "values": erasure.values - values_before,
            "rows": delta,
            "attachments": attachments,
        },
    )
    erasure.runs.append(str(run.pk))


def _sealed_stores(
    run_id: Any, task_ids: list[Any]
) -> Iterable[tuple[str, models.QuerySet, tuple[str, ...]]]:
    """Each store of a run's JSON documents that may hold sealed values, with its columns."""
    return (
        ("run", WorkflowRun.objects.filter(pk=run_id), ("input", "result", "error")),
        ("steps", StepRun.objects.filter(run_id=run_id), ("result", "item_value", "last_error")),
        ("events", StepEvent.objects.filter(run_id=run_id), ("detail",)),
        ("signals", Signal.objects.filter(run_id=run_id), ("payload", "answer")),
        (
            "tasks",
            HumanTask.objects.filter(pk__in=task_ids),
            ("form_values", "changes", "search_data", "draft"),
        ),
        ("inbox", InboxEntry.objects.filter(task_id__in=task_ids), ("data",)),
    )


# The engine's documents that carry a decision's or a resubmission's comment (the
# signal's payload, and the step result and events that keep it).
_CARRYING_COMMENTS = frozenset({"steps", "events", "signals"})


def _without_comments(value: Any) -> tuple[Any, int]:
    """`value` with every non-empty "comment" in it tombstoned, and how many."""
    if isinstance(value, dict):
        count = 0
        items = {}
        for name, item in value.items():
            if name == "comment" and isinstance(item, str) and item not in ("", personal.TOMBSTONE):
                items[name], found = personal.TOMBSTONE, 1
            else:
                items[name], found = _without_comments(item)
            count += found
        return (items, count) if count else (value, 0)
    if isinstance(value, list):
        pairs = [_without_comments(item) for item in value]
        count = sum(found for _, found in pairs)
        return ([item for item, _ in pairs], count) if count else (value, 0)
    return value, 0


def _copies(found: list[Any]) -> list[str]:
    """The erased values as text that derived copies (a title, a notice) may hold, longest
    first, so a value inside another is replaced after it."""
    texts = {str(value) for value in found if value not in (None, "", personal.TOMBSTONE)}
    return sorted((text for text in texts if len(text) >= _SHORTEST_COPY), key=len, reverse=True)


def _scrub(value: Any, copies: list[str]) -> Any:
    """`value` (text, or JSON) with every copy in it replaced by the tombstone."""
    if isinstance(value, str):
        for copy in copies:
            value = value.replace(copy, personal.TOMBSTONE)
        return value
    if isinstance(value, dict):
        return {name: _scrub(item, copies) for name, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item, copies) for item in value]
    return value


def _erase_text(run_id: Any, task_ids: list[Any], copies: list[str], erasure: Erasure) -> None:
    """Comments and decision reasons are tombstoned whole (free text about the request);
    titles, notices, webhook messages and audit labels lose the copies of erased values."""
    erasure.count(
        "comments",
        Comment.objects.filter(task_id__in=task_ids)
        .exclude(body=personal.TOMBSTONE)
        .update(body=personal.TOMBSTONE),
    )
    erasure.count(
        "tasks",
        HumanTask.objects.filter(pk__in=task_ids)
        .exclude(comment="")
        .exclude(comment=personal.TOMBSTONE)
        .update(comment=personal.TOMBSTONE),
    )
    _erase_audit_comments(run_id, task_ids, erasure)
    if not copies:
        return
    task_types = ContentType.objects.get_for_model(HumanTask)
    for store, rows, column in (
        ("tasks", HumanTask.objects.filter(pk__in=task_ids), "title"),
        ("inbox", InboxEntry.objects.filter(task_id__in=task_ids), "title"),
        (
            "notifications",
            Notification.objects.filter(Q(run_id=run_id) | Q(task_id__in=task_ids)),
            "text",
        ),
        ("webhook_deliveries", WebhookDelivery.objects.filter(_deliveries_of(run_id)), "payload"),
        (
            "audit_labels",
            LogEntry.objects.filter(
                content_type=task_types, object_pk__in=[str(pk) for pk in task_ids]
            ),
            "object_repr",
        ),
    ):
        _scrub_column(store, rows, column, copies, erasure)


def _erase_audit_comments(run_id: Any, task_ids: list[Any], erasure: Erasure) -> None:
    """Tombstone the words of the run's and its tasks' audit comments; the chain covers
    their keyed digest (approvals.audit.hashing.chained_comment), so it still verifies.
    Entries written before comments were digested keep theirs (see SECURITY.md)."""
    subjects = Q(
        content_type=ContentType.objects.get_for_model(HumanTask),
        object_pk__in=[str(pk) for pk in task_ids],
    ) | Q(content_type=ContentType.objects.get_for_model(WorkflowRun), object_pk=str(run_id))
    entries = (
        LogEntry.objects.filter(subjects, additional_data__has_key="comment_digest")
        .exclude(additional_data__comment=ERASED_COMMENT)
        .exclude(additional_data__event="personal_data_erased")
    )
    for entry in entries.only("pk", "additional_data"):
        data = {**entry.additional_data, "comment": ERASED_COMMENT}
        LogEntry.objects.filter(pk=entry.pk).update(additional_data=data)
        erasure.count("audit_comments")


def _deliveries_of(run_id: Any) -> Q:
    return Q(payload__data__run_id=str(run_id))


def _scrub_column(
    store: str, rows: models.QuerySet, column: str, copies: list[str], erasure: Erasure
) -> None:
    for pk, value in rows.values_list("pk", column):
        scrubbed = _scrub(value, copies)
        if scrubbed != value:
            rows.model.objects.filter(pk=pk).update(**{column: scrubbed})
            erasure.count(store)


def _erase_attachments(run_id: Any, erasure: Erasure) -> list[str]:
    """Delete the run's attached files from storage (once this commits) and tombstone their
    names; the rows stay, naming the erasure, so `verify_audit` tells an erased file from
    a lost one."""
    erased = []
    names = []
    for attachment in Attachment.objects.filter(run_id=run_id).exclude(file=""):
        names.append(attachment.file.name)
        erased.append(str(attachment.pk))
    if erased:
        Attachment.objects.filter(pk__in=erased).update(file="", name=personal.TOMBSTONE)
        # Their audit entries' labels name them (not chained: the chain holds the name as
        # it was attached, see SECURITY.md).
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(Attachment), object_pk__in=erased
        ).update(object_repr=f"attachment {personal.TOMBSTONE}")
        transaction.on_commit(lambda: [default_storage.delete(name) for name in names])
        erasure.count("attachments", len(erased))
    return erased


# ---------------------------------------------------------------------------
# Rotation
# ---------------------------------------------------------------------------

# Every column that may hold sealed values, by model; rows are found by their text.
_ROTATED: tuple[tuple[type[models.Model], tuple[str, ...]], ...] = (
    (WorkflowRun, ("input", "result", "error")),
    (StepRun, ("result", "item_value", "last_error")),
    (StepEvent, ("detail",)),
    (Signal, ("payload", "answer")),
    (HumanTask, ("form_values", "changes", "search_data", "draft")),
    (InboxEntry, ("data",)),
)
_BATCH = 500


def rotate_data_keys(*, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Seal every personal value again under the newest key; return how many, by model.

    Reads only rows whose JSON holds an envelope, a batch at a time, each batch in its
    own transaction with its rows locked; a value the newest key already sealed is left
    as it is, so running it again writes nothing."""
    personal.keys()  # refuse before reading anything if there is no key
    counts: dict[str, int] = {}
    for model, columns in _ROTATED:
        holds = Q()
        for column in columns:
            holds |= Q(**{f"_{column}_text__contains": f'"{personal.ENVELOPE}"'})
        texts = {f"_{column}_text": Cast(column, TextField()) for column in columns}
        sealed = model.objects.annotate(**texts).filter(holds).order_by("pk")
        ids = list(sealed.values_list("pk", flat=True))
        rotated = 0
        for start in range(0, len(ids), _BATCH):
            with transaction.atomic():
                for row in model.objects.select_for_update().filter(pk__in=ids[start:][:_BATCH]):
                    changed = {}
                    for column in columns:
                        value, count = personal.rotate(getattr(row, column))
                        if count:
                            changed[column] = value
                            rotated += count
                    if changed:
                        model.objects.filter(pk=row.pk).update(**changed)
        counts[model.__name__] = rotated
        if progress is not None:
            progress(f"{model.__name__}: {rotated} value(s) sealed again")
    return counts


# ---------------------------------------------------------------------------
# Sealing what was stored in clear
# ---------------------------------------------------------------------------


def seal_plaintext(*, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Seal the values of fields marked personal that are stored in clear: those of runs
    started before their type marked the field (an upgrade, a newly marked field).
    Return how many, by model; running it again seals nothing more.

    Reaches the run's input, the inputs and form values its signals and step results
    carry (a resubmission's `input` and `previous`, a decision's `values`), and its
    tasks' form values and changes. Audit entries written before stay as they were
    chained (SECURITY.md, "Personal data")."""
    counts = {"WorkflowRun": 0, "Signal": 0, "StepRun": 0, "HumanTask": 0}
    for definition in registry.all_definitions():
        forms = {
            node.name: node.personal_form
            for node in definition.nodes
            if isinstance(node, Approval) and node.personal_form
        }
        names = frozenset(definition.personal_input).union(*forms.values())
        if not names:
            continue
        runs = WorkflowRun.objects.filter(
            workflow_type=definition.name, workflow_version=definition.version
        )
        ids = list(runs.order_by("pk").values_list("pk", flat=True))
        for start in range(0, len(ids), _BATCH):
            with transaction.atomic():
                batch = ids[start:][:_BATCH]
                for model, rows, columns in (
                    (WorkflowRun, WorkflowRun.objects.filter(pk__in=batch), ("input",)),
                    (Signal, Signal.objects.filter(run_id__in=batch), ("payload",)),
                    (StepRun, StepRun.objects.filter(run_id__in=batch), ("result",)),
                    (
                        HumanTask,
                        HumanTask.objects.filter(run_id__in=batch),
                        ("form_values", "changes", "draft"),
                    ),
                ):
                    for row in rows.select_for_update():
                        changed = {}
                        for column in columns:
                            value, count = _sealed_document(
                                model, column, getattr(row, column), names
                            )
                            if count:
                                changed[column] = value
                                counts[model.__name__] += count
                        if changed:
                            model.objects.filter(pk=row.pk).update(**changed)
    if progress is not None:
        for name, count in counts.items():
            progress(f"{name}: {count} value(s) stored in clear sealed")
    return counts


def _sealed_document(
    model: type[models.Model], column: str, value: Any, names: frozenset[str]
) -> tuple[Any, int]:
    """`value` with its personal fields sealed where a document of this kind keeps them."""
    if not isinstance(value, dict):
        return value, 0
    if column == "changes":  # {field: [old, new]}
        return _sealed_pairs(value, names)
    if model in (WorkflowRun, HumanTask):  # an input, a form's values
        return _sealed_top(value, names)
    # A signal's payload, or the step result that keeps it (under "payload").
    payload = value.get("payload") if model is StepRun else value
    if not isinstance(payload, dict):
        return value, 0
    total = 0
    new_payload = dict(payload)
    for key in ("input", "previous", "values"):
        new_payload[key], count = _sealed_top(payload.get(key), names)
        total += count
        if payload.get(key) is None and key not in payload:
            new_payload.pop(key)
    decisions = payload.get("decisions")
    if isinstance(decisions, list):
        sealed_decisions = []
        for decision in decisions:
            if isinstance(decision, dict):
                values, count = _sealed_top(decision.get("values"), names)
                total += count
                decision = {**decision, "values": values} if count else decision
            sealed_decisions.append(decision)
        new_payload["decisions"] = sealed_decisions
    if "changes" in payload:
        new_payload["changes"], count = _sealed_pairs(payload["changes"], names)
        total += count
    if not total:
        return value, 0
    return ({**value, "payload": new_payload} if model is StepRun else new_payload), total


def _clear(value: Any) -> bool:
    return value is not None and value != personal.TOMBSTONE and not personal.is_sealed(value)


def _sealed_top(data: Any, names: frozenset[str]) -> tuple[Any, int]:
    if not isinstance(data, dict):
        return data, 0
    clear = [name for name in names if _clear(data.get(name))]
    if not clear:
        return data, 0
    return {**data, **{name: personal.seal(data[name]) for name in clear}}, len(clear)


def _sealed_pairs(changes: Any, names: frozenset[str]) -> tuple[Any, int]:
    if not isinstance(changes, dict):
        return changes, 0
    total = 0
    sealed = dict(changes)
    for name in names:
        pair = changes.get(name)
        if isinstance(pair, list):
            sealed[name] = [personal.seal(item) if _clear(item) else item for item in pair]
            total += sum(1 for item in pair if _clear(item))
    return (sealed, total) if total else (changes, 0)
