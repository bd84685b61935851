"""List dead-lettered runs, and retry or resume them, from the command line, audited."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from workflows import engine
from workflows.management.operators import operator_named
from workflows.models import WorkflowRun
from workflows.operating import act_on_run
from workflows.states import RunState


class Command(BaseCommand):
    help = "List dead-lettered runs; retry one's failed step or resume past it."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        actions.add_parser("list", help="list dead-lettered runs and why")
        retry = actions.add_parser("retry", help="try the failed step again, fresh attempts")
        resume = actions.add_parser("resume", help="move past the failed step (done by hand)")
        for action in (retry, resume):
            action.add_argument("run_id")
            action.add_argument(
                "--by",
                metavar="USERNAME",
                help="the operator the audit log names (default: none)",
            )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "list":
            for run in WorkflowRun.objects.filter(state=RunState.DEAD_LETTERED):
                failure = (run.error or {}).get("dead_letter", {})
                self.stdout.write(
                    f"{run.pk} {run.workflow_type} failed undoing {failure.get('node')}: "
                    f"{failure.get('compensation_error', {}).get('message', '')}"
                )
            return
        operation = {"retry": engine.retry_dead_letter, "resume": engine.resume_dead_letter}
        actor = operator_named(options["by"], what="retry or resume dead letters")
        try:
            run = act_on_run(
                use_case=operation[options["action"]],
                run_id=options["run_id"],
                actor=actor,
                channel="command",
            )
        except engine.EngineError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"{run.pk} is {run.state}"))
