"""Eight reviewers decide one human task at the same instant, through the real service.

Each round opens a task for a group of eight, releases eight threads together
(each with its own database connection) into `approve_human_task`, and checks
that exactly one decision won and the seven others were refused with a message.
"""

from __future__ import annotations

import threading
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import connection

from approvals import human_tasks
from approvals.states import Channel
from bench import definitions
from bench.measure import median, now_ns
from bench.profiles import Profile
from bench.report import Result
from workflows import engine

REVIEWERS = 8


def _reviewers() -> list[User]:
    group, _ = Group.objects.get_or_create(name=definitions.REVIEWERS_GROUP)
    people = []
    for number in range(1, REVIEWERS + 1):
        person, _ = User.objects.get_or_create(username=f"bench-decider-{number}")
        person.groups.add(group)
        people.append(person)
    return people


def one_round(*, people: list[User]) -> tuple[list[float], int, list[str]]:
    """Return each reviewer's latency (ms), how many won, and the refusals' messages."""
    run, _ = engine.start_workflow(
        workflow_type=definitions.APPROVAL_QUEUE, input={"title": "Decide me"}
    )
    task_id = run.human_tasks.get().pk
    barrier = threading.Barrier(len(people))
    outcomes: list[Any] = [None] * len(people)
    latencies = [0.0] * len(people)

    def decide(index: int, person: User) -> None:
        barrier.wait()
        started = now_ns()
        try:
            outcomes[index] = human_tasks.approve_human_task(
                task_id=task_id, user=person, channel=Channel.INBOX
            )
        except human_tasks.TaskError as error:
            outcomes[index] = error
        finally:
            latencies[index] = (now_ns() - started) / 1e6
            connection.close()

    threads = [threading.Thread(target=decide, args=item) for item in enumerate(people)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = sum(1 for outcome in outcomes if not isinstance(outcome, Exception))
    refusals = [str(outcome) for outcome in outcomes if isinstance(outcome, human_tasks.TaskError)]
    return latencies, won, [message for message in refusals if message]


def run(*, profile: Profile) -> list[Result]:
    people = _reviewers()
    rounds = max(2, min(10, profile.step_runs))
    latencies: list[float] = []
    winners: list[int] = []
    refused: list[int] = []
    sample = ""
    for _ in range(rounds):
        times, won, messages = one_round(people=people)
        latencies += times
        winners.append(won)
        refused.append(len(messages))
        sample = sample or (messages[0] if messages else "")
    worst_won = max(winners, key=lambda value: abs(value - 1))
    worst_refused = min(refused)
    return [
        Result(
            "decide_p50_ms",
            median(latencies),
            samples=len(latencies),
            note=f"{rounds} rounds of {REVIEWERS} threads released by a barrier into "
            "approvals.human_tasks.decide.approve_human_task",
        ),
        Result("decide_max_ms", max(latencies)),
        Result("decide_winners", worst_won, note=f"winners per round: {winners}"),
        Result(
            "decide_refused",
            worst_refused,
            note=f"refused with a message per round: {refused}; e.g. “{sample}”",
        ),
    ]
