"""One step of a benchmark run, in a process of its own: `python -m bench.group NAME ...`.

`python -m bench` (the driver) runs each group here with the environment it needs
(its database, its broker: memory:// in-process, Redis through workers), so no
group's settings leak into another's. Each writes what it measured as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import django


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.group")
    parser.add_argument(
        "name",
        choices=[
            "engine",
            "dbos",
            "long",
            "map",
            "celery",
            "sweep",
            "inbox",
            "decide",
            "audit",
            "scale",
            "seed",
            "scale-seed",
            "leaves",
        ],
    )
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--databases", type=Path, help="JSON: the seeded databases")
    parser.add_argument("--logs", type=Path, default=Path("var/bench/logs"))
    parser.add_argument("--waiting-runs", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=0)
    parser.add_argument("--runs", type=int, default=0)
    args = parser.parse_args(argv)

    from bench.processes import stop_on_signals

    stop_on_signals()
    django.setup()
    from bench.profiles import PROFILES, Seed

    profile = PROFILES[args.profile]
    seeded: dict[str, Any] = json.loads(args.databases.read_text()) if args.databases else {}
    output: Any
    if args.name == "leaves":
        from django.db.migrations.loader import MigrationLoader

        output = sorted(
            map(list, MigrationLoader(None, ignore_no_migrations=True).graph.leaf_nodes())
        )
    elif args.name == "seed":
        from bench import seed

        output = seed.seed(size=Seed(waiting_runs=args.waiting_runs, tasks=args.tasks))
    elif args.name == "scale-seed":
        from bench import scale_seed

        output = scale_seed.seed_scale(runs=args.runs)
    elif args.name == "scale":
        from bench import scale

        output = scale.run(profile=profile, seeded=seeded)
    elif args.name == "engine":
        from bench import engine

        output = engine.run(profile=profile)
    elif args.name == "dbos":
        from bench import dbos_engine

        output = dbos_engine.run(profile=profile)
    elif args.name == "long":
        from bench import long_run

        output = long_run.run(profile=profile)
    elif args.name == "map":
        from bench import map_items

        output = map_items.run(profile=profile)
    elif args.name == "celery":
        from bench import workers

        output = workers.run(profile=profile, logs=args.logs)
    elif args.name == "sweep":
        from bench import sweep

        output = sweep.run(profile=profile, seeded=seeded)
    elif args.name == "inbox":
        from bench import inbox

        output = inbox.run(profile=profile, seeded=seeded, logs=args.logs)
    elif args.name == "audit":
        from bench import audit_export

        output = audit_export.run(profile=profile)
    else:
        from bench import decide

        output = decide.run(profile=profile)
    if isinstance(output, list) and output and hasattr(output[0], "key"):
        output = [asdict(result) for result in output]
    args.out.write_text(json.dumps(output, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
