"""DBOS Transact beside Baton: its in-process step and start, on the same server.

DBOS keeps a workflow's state in its own system database (here a database of its
own on the benchmark's server, `<base>_dbos`), and runs workflows in the calling
process. Its figures are measured the way Baton's engine group measures its own:

- a step: a workflow of 10 no-op steps, each step call timed inside the workflow
  (DBOS reads whether the step already ran, runs it and records its output);
- a start: `DBOS.start_workflow` of a 3-step workflow, timed until it returns a
  handle (the workflow's row is written; the workflow runs in a thread of DBOS's).
  Each workflow is waited for outside the timed region, so no two overlap.

The driver puts Baton's step and start over DBOS's in the `dbos` rows of the table.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from bench.measure import median, now_ns
from bench.profiles import Profile
from bench.report import Result

STEPS_PER_RUN = 10


def run(*, profile: Profile) -> list[Result]:
    from dbos import DBOS, DBOSConfig

    url = os.environ["BENCH_DBOS_DATABASE_URL"]
    config: DBOSConfig = {
        "name": "baton-bench",
        "system_database_url": url,
        "log_level": "WARNING",
        "sys_db_pool_size": 4,
    }
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config=config)
    step_times: list[float] = []

    @DBOS.step()
    def noop() -> None:
        return None

    @DBOS.workflow()
    def ten_steps() -> int:
        for _ in range(STEPS_PER_RUN):
            started = now_ns()
            noop()
            step_times.append((now_ns() - started) / 1e6)
        return STEPS_PER_RUN

    @DBOS.workflow()
    def three_steps() -> int:
        for _ in range(3):
            noop()
        return 3

    DBOS.launch()
    try:
        # Warm up: the first calls open connections and prepare what DBOS caches.
        for _ in range(3):
            ten_steps()
        step_times.clear()
        for _ in range(profile.step_runs):
            ten_steps()
        start_times: list[float] = []
        handles: list[Any] = []
        for _ in range(profile.start_samples):
            started = now_ns()
            handle = DBOS.start_workflow(three_steps)
            start_times.append((now_ns() - started) / 1e6)
            handle.get_result()
            handles.append(handle)
    finally:
        DBOS.destroy(destroy_registry=True)
    return [
        Result(
            "dbos_step_in_process_ms",
            median(step_times),
            samples=len(step_times),
            note=f"DBOS Transact {_version()}: a no-op @DBOS.step, timed inside its workflow",
        ),
        Result(
            "dbos_start_p50_ms",
            median(start_times),
            samples=len(start_times),
            note="DBOS.start_workflow of a 3-step workflow, until it returns its handle",
        ),
    ]


def _version() -> str:
    from importlib.metadata import version

    return version("dbos")
