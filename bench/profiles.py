"""How big a run is: `full` (the issue's sizes), `quick` (about a minute), `tiny` (for CI)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Seed:
    """A seeded database: waiting Sleep runs (the sweep's) and human tasks (the inbox's)."""

    waiting_runs: int
    tasks: int

    @property
    def label(self) -> str:
        return f"r{self.waiting_runs}_t{self.tasks}"


@dataclass(frozen=True)
class Profile:
    name: str
    # In-process engine figures.
    commit_samples: int
    step_runs: int  # 10-step runs driven step by step (each gives 10 samples)
    start_samples: int
    long_run_steps: int
    # Through Celery.
    round_trip_samples: int
    ten_step_samples: int
    e2e_samples: int
    throughput_runs: int
    # The sweep and the inbox: a small and a large seeded database.
    small: Seed
    large: Seed
    due_timers: int
    # Seconds of load per inbox scenario.
    load_seconds: float
    deep_pages: int
    # The long list of the map group (its short list has 10 items).
    map_items: int = 1000
    # Audit entries exported by the audit group: few, then many.
    audit_small: int = 10_000
    audit_large: int = 1_000_000
    # The scale group (opt-in): finished runs of history, few then many (--scale-runs).
    scale_small_runs: int = 10_000
    scale_large_runs: int = 200_000
    scale_samples: int = 100
    scale_engine_runs: int = 100

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


PROFILES = {
    "full": Profile(
        name="full",
        commit_samples=1000,
        step_runs=100,
        start_samples=500,
        long_run_steps=10000,
        round_trip_samples=500,
        ten_step_samples=100,
        e2e_samples=500,
        throughput_runs=1000,
        small=Seed(waiting_runs=10_000, tasks=1_000),
        large=Seed(waiting_runs=1_000_000, tasks=1_000_000),
        due_timers=5000,
        load_seconds=10,
        deep_pages=30,
    ),
    "quick": Profile(
        name="quick",
        commit_samples=300,
        step_runs=20,
        start_samples=150,
        long_run_steps=1000,
        round_trip_samples=50,
        ten_step_samples=10,
        e2e_samples=60,
        throughput_runs=100,
        small=Seed(waiting_runs=10_000, tasks=1_000),
        large=Seed(waiting_runs=100_000, tasks=100_000),
        due_timers=500,
        load_seconds=2,
        deep_pages=30,
        map_items=200,
        audit_large=100_000,
    ),
    "tiny": Profile(
        name="tiny",
        commit_samples=50,
        step_runs=2,
        start_samples=20,
        long_run_steps=100,
        round_trip_samples=10,
        ten_step_samples=3,
        e2e_samples=10,
        throughput_runs=20,
        small=Seed(waiting_runs=1_000, tasks=1_000),
        large=Seed(waiting_runs=5_000, tasks=5_000),
        due_timers=100,
        load_seconds=0.5,
        deep_pages=5,
        map_items=50,
        audit_small=2_000,
        audit_large=6_000,
        scale_small_runs=1_000,
        scale_large_runs=4_000,
        scale_samples=5,
        scale_engine_runs=5,
    ),
}
