"""Move the live runs of a workflow type from one version to another: a dry run by default."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows import engine
from workflows.engine import MigrationReport, RunMove
from workflows.management.operators import operator_named
from workflows.registry import UnknownWorkflow
from workflows.versions import InvalidMigration, parse_renames


class Command(BaseCommand):
    help = (
        "Move the unfinished runs of a workflow type from version A to version B. Without "
        "--apply, only say for every run whether it can move and why not. Nodes map by name; "
        "--rename old=new maps a node B calls otherwise. Each run moves in its own transaction, "
        "audited; a run that cannot move is left as it is and named."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workflow_type", help="the type, e.g. expense")
        parser.add_argument("--from", dest="from_version", type=int, required=True)
        parser.add_argument("--to", dest="to_version", type=int, required=True)
        parser.add_argument(
            "--rename",
            action="append",
            default=[],
            metavar="OLD=NEW",
            help="A's node OLD is B's node NEW (repeat for several)",
        )
        parser.add_argument(
            "--apply", action="store_true", help="move the runs that can (default: a dry run)"
        )
        parser.add_argument(
            "--by",
            metavar="USERNAME",
            help="the operator the audit log names (default: none, with this login's name)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            renames = parse_renames(options["rename"])
        except InvalidMigration as error:
            raise CommandError(_problems(error)) from None
        request = {
            "workflow_type": options["workflow_type"],
            "from_version": options["from_version"],
            "to_version": options["to_version"],
            "renames": renames,
        }
        try:
            if options["apply"]:
                actor = operator_named(options["by"], what="move runs")
                report = engine.migrate_runs(
                    **request,
                    actor=actor,
                    channel="command",
                    comment=f"manage.py migrate_runs, as {getpass.getuser()} on this host",
                )
            else:
                report = engine.preview_migration(**request)
        except UnknownWorkflow as error:
            raise CommandError(str(error)) from None
        except InvalidMigration as error:
            raise CommandError(_problems(error)) from None
        if report.applied:
            self._applied(report, verbose=options["verbosity"] > 1)
        else:
            self._dry_run(report)

    def _dry_run(self, report: MigrationReport) -> None:
        self.stdout.write(f"Dry run: {_title(report)}. Nothing is changed.")
        for run in report.runs:
            self.stdout.write(_line(run))
        movable, blocked = len(report.movable), len(report.blocked)
        self.stdout.write(
            f"{len(report.runs)} unfinished run(s) of {_version(report, report.from_version)}: "
            f"{movable} can move, {blocked} cannot."
        )
        if movable:
            self.stdout.write(f"Run again with --apply to move the {movable} that can.")

    def _applied(self, report: MigrationReport, *, verbose: bool) -> None:
        self.stdout.write(f"{_title(report)}.")
        for run in report.runs:
            if verbose or not run.moved:
                self.stdout.write(_line(run))
        moved, blocked = len(report.moved), len(report.blocked)
        summary = (
            f"Moved {moved} of {len(report.runs)} unfinished run(s) to "
            f"{_version(report, report.to_version)}."
        )
        self.stdout.write(self.style.SUCCESS(summary) if moved else summary)
        if blocked:
            self.stdout.write(
                self.style.WARNING(f"{blocked} could not move and were left as they were (above).")
            )


def _title(report: MigrationReport) -> str:
    renames = ", ".join(f"{old}={new}" for old, new in report.renames.items())
    title = (
        f"moving {report.workflow_type} runs from v{report.from_version} to "
        f"v{report.to_version}" + (f" (renames: {renames})" if renames else "")
    )
    return title[0].upper() + title[1:]


def _version(report: MigrationReport, version: int) -> str:
    return f"{report.workflow_type} v{version}"


def _line(run: RunMove) -> str:
    at = f"at {', '.join(run.at)}" if run.at else "not started"
    if run.moved:
        verdict = "moved"
    elif run.can_move:
        verdict = "can move"
    else:
        verdict = "cannot move: " + "; ".join(run.reasons)
    return f"  {run.run_id}  {run.state:<13} {at:<28} {verdict}"


def _problems(error: InvalidMigration) -> str:
    return "The plan cannot be followed:\n" + "\n".join(f"- {p}" for p in error.problems)
