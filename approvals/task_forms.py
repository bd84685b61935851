"""The form a reviewer fills in to approve a task (`Approval.form`), for people and the API.

A task form is drawn, read back and given its errors by `approvals.start_forms`,
the same generator as the start forms, and validated by the approval's own
`Approval.validate_form` in the approve use case, never here. Its boxes are
posted as "form-<field>", so they never meet the decision panel's own fields
("comment", "version", "confirm"). Plain data in and out, apart from finding a
task's approval node in the registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

import pydantic
from django.template.defaultfilters import filesizeformat

from approvals import start_forms
from workflows import openapi, registry
from workflows.dsl import ATTACHMENT_FORMAT, Approval, UserTask, Workflow

PREFIX = "form-"


def approval_of(task: Any) -> Approval | None:
    """Return the approval node that opened `task` (None if its definition is gone)."""
    return approval_node(
        workflow_type=task.run.workflow_type,
        workflow_version=task.run.workflow_version,
        node=task.node,
    )


def approval_node(*, workflow_type: str, workflow_version: int, node: str) -> Approval | None:
    """Return the approval node `node` of a definition (None if it is gone, or no approval)."""
    try:
        found = registry.get(workflow_type, workflow_version).node(node)
    except (registry.UnknownWorkflow, KeyError):
        return None
    return found if isinstance(found, Approval) else None


def spec_of(node: Approval | None, files: Sequence[Any] = ()) -> start_forms.FormSpec | None:
    """The form's boxes, or None for an approval that asks for nothing; a field holding an
    attached file (dsl.AttachedFile) offers the request's `files` to choose from."""
    if node is None or node.form is None:
        return None
    spec = start_forms.spec_for(node.form, prefix=PREFIX)
    named = set(attachment_fields(node.form))
    if not named:
        return spec
    choices = tuple((str(file.pk), f"{file.name} ({filesizeformat(file.size)})") for file in files)
    values = {key: key for key, _ in choices}
    return replace(
        spec,
        fields=tuple(
            replace(box, widget="select", choices=choices, values=values)
            if isinstance(box, start_forms.FieldSpec) and box.name in named
            else box
            for box in spec.fields
        ),
    )


def attachment_fields(form: type[pydantic.BaseModel]) -> list[str]:
    """The names of the form's fields that hold an attached file (dsl.AttachedFile)."""
    return [
        name
        for name, prop in json_schema_of(form).get("properties", {}).items()
        if any(
            option.get("format") == ATTACHMENT_FORMAT for option in (prop, *prop.get("anyOf", ()))
        )
    ]


def blank(node: Approval | None, files: Sequence[Any] = ()) -> start_forms.Form | None:
    spec = spec_of(node, files)
    return start_forms.blank(spec) if spec else None


def filled(
    node: Approval | None, values: Mapping[str, Any], files: Sequence[Any] = ()
) -> start_forms.Form | None:
    """The form showing `values` (a data-entry task's draft) in its boxes."""
    spec = spec_of(node, files)
    return start_forms.filled(spec, values) if spec else None


def read(
    node: Approval | None, posted: Mapping[str, str], files: Sequence[Any] = ()
) -> tuple[dict[str, Any], start_forms.Form | None]:
    """Return the values the posted form stands for, and the form to show them again."""
    spec = spec_of(node, files)
    if spec is None:
        return {}, None
    return start_forms.read(spec, posted)


def with_errors(form: start_forms.Form, errors: list[dict[str, str]]) -> start_forms.Form:
    """Put each error of `InvalidForm.errors` (or the API's "form.<field>") by its box."""
    return start_forms.with_errors(
        form,
        [{**error, "field": error["field"].removeprefix("form.")} for error in errors],
    )


def in_words(form: type[pydantic.BaseModel], errors: list[dict[str, str]]) -> str:
    """Say what is wrong with the values, field by field, as a person would read it."""
    specs = {spec.name: spec for spec in start_forms.spec_for(form).fields}
    problems = []
    for error in errors:
        name = error["field"].split(".")[0]
        spec = specs.get(name)
        label = spec.label if spec else name.replace("_", " ").capitalize()
        field_spec = spec if isinstance(spec, start_forms.FieldSpec) else None
        problems.append(f"{label}: {start_forms.plain(error, field_spec)}")
    return " ".join(problems)


@cache
def json_schema_of(form: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The form's JSON Schema, for API callers (made once per class; treat it as read-only)."""
    return form.model_json_schema()


def drawing_problems(workflow: Workflow) -> list[str]:
    """Return why a form of `workflow` could not be filled in on a task's page.

    Lists need rows added and removed on the page, which the task page does not
    offer; a field the generator has no box for could never be filled in at all.
    """
    problems = []
    for node in workflow.nodes:
        if not isinstance(node, Approval) or node.form is None:
            continue
        try:
            spec = start_forms.spec_for(node.form)
        except Exception as error:  # the static check names what makes the schema fail
            problems.append(f"the form of {_kind(node)} {node.name!r} cannot be drawn: {error}")
            continue
        lists = [item.name for item in spec.fields if isinstance(item, start_forms.ListSpec)]
        missing = [*spec.cannot_fill, *spec.left_out, *lists]
        if missing:
            problems.append(
                f"the form of {_kind(node)} {node.name!r} has fields a task page cannot show: "
                f"{', '.join(missing)} (use text, numbers, dates, choices or a mapping)"
            )
    return problems


def _kind(node: Approval) -> str:
    return "user task" if isinstance(node, UserTask) else "approval"


def document_task_forms(schema: dict[str, Any]) -> dict[str, Any]:
    """Document, in the OpenAPI document `schema`, the form of every approval and user task
    of every registered workflow type: one component each, the decision's `form` as any
    one of the approvals' (or no values, for an approval without a form), and a
    completion's `form` as any one of the user tasks'."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    decision = components.get("DecisionIn", {}).get("properties", {})
    completion = components.get("CompleteIn", {}).get("properties", {})
    choices: list[dict[str, Any]] = []
    entry_choices: list[dict[str, Any]] = []
    by_type: dict[str, dict[str, dict[str, str]]] = {}
    for workflow in sorted(registry.all_definitions(), key=lambda w: (w.name, w.version)):
        for node in workflow.nodes:
            if not isinstance(node, Approval) or node.form is None:
                continue
            kind = "user task" if isinstance(node, UserTask) else "approval"
            reference = openapi.add_model(
                components,
                f"TaskForm_{workflow.name}_v{workflow.version}_{node.name}",
                node.form,
                title=f"{workflow.name} v{workflow.version}: {node.name}",
                about=f"The form of {kind} {node.name!r} in workflow type {workflow.name!r} "
                f"(version {workflow.version}).",
            )
            if isinstance(node, UserTask):
                entry_choices.append(reference)
                continue
            choices.append(reference)
            by_type.setdefault(workflow.name, {})[node.name] = reference
    if "form" in completion and entry_choices:
        completion["form"] = {
            "title": "Form",
            "description": completion["form"].get("description", ""),
            "anyOf": entry_choices,
        }
    if "form" in decision:
        nothing = {"type": "object", "maxProperties": 0, "title": "No values"}
        listed = "; ".join(
            f"{kind}: {', '.join(sorted(nodes))}" for kind, nodes in sorted(by_type.items())
        )
        decision["form"] = {
            "title": "Form",
            "description": decision["form"].get("description", "")
            + (f". Approvals with a form, by workflow type: {listed}." if listed else "."),
            "anyOf": [*choices, nothing, {"type": "null"}],
            "default": None,
            "x-baton-task-forms": by_type,
        }
    return schema
