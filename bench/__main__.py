"""The driver: `python -m bench [--quick | --tiny] [--only GROUP] [--json PATH]`.

Prepares the benchmark's databases (see bench.databases), runs each group of
figures in a process of its own (see bench.group), then prints the table and
writes it as JSON to var/bench/results-<timestamp>.json and var/bench/latest.json.
Figures are reported, never asserted: the exit status says only whether every
group ran.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from bench import report
from bench.databases import Server, url_for
from bench.processes import ROOT, stop_on_signals
from bench.profiles import PROFILES, Profile, Seed

DEFAULT_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_BROKER = "redis://127.0.0.1:6379/14"
SHIPPED_MODULES = "workflows.examples.order,approvals.examples"
# Bump when the seeder changes what it makes, so kept seeded databases are rebuilt.
SEED_VERSION = 4
SCALE_SEED_VERSION = 6


T = TypeVar("T")


class GroupFailed(Exception):
    """A group (or the seeding it needs) failed twice; the message says why."""


class Driver:
    def __init__(self, args: argparse.Namespace, profile: Profile) -> None:
        self.args = args
        self.profile = profile
        self.server_url = os.environ.get("DATABASE_URL") or DEFAULT_SERVER
        self.broker_url = os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER
        self.base = args.database
        self.server = Server(self.server_url)
        self.stamp = time.strftime("%Y%m%d-%H%M%S")
        self.out = Path(os.environ.get("BATON_VAR_DIR") or ROOT / "var") / "bench"
        self.logs = self.out / "logs" / self.stamp
        self.logs.mkdir(parents=True, exist_ok=True)
        self.work = self.logs / "work"
        self.work.mkdir(exist_ok=True)
        self.made: set[str] = set()
        self.retried: dict[str, str] = {}

    # -- processes ---------------------------------------------------------

    def env(self, *, database: str, broker: str = "memory://", long_runs: bool = False) -> dict:
        modules = os.environ.get("BATON_WORKFLOW_MODULES") or SHIPPED_MODULES
        modules += ",bench.definitions" + (",bench.long_chain" if long_runs else "")
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or "bench-" + "x" * 50,
            "DATABASE_URL": url_for(self.server_url, database),
            "CELERY_BROKER_URL": broker,
            "BATON_WORKFLOW_MODULES": modules,
            "PYTHONUNBUFFERED": "1",
            # A queue per base name: two runs on one broker never take each other's work.
            "BENCH_QUEUE": f"bench.{self.base}",
        }

    def call(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        """Run a child to its end, its output in the logs; on Ctrl-C let it clean up first."""
        with open(self.logs / f"{name}.log", "ab") as log:
            child = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True
            )
            try:
                # A group prints its progress (and nothing else) on stdout.
                for line in child.stdout or ():
                    say(f"  {line.rstrip()}")
                code = child.wait()
            except KeyboardInterrupt:
                child.send_signal(signal.SIGTERM)
                try:
                    child.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()
                raise
        if code != 0:
            tail = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{name} failed (exit {code}):\n  " + "\n  ".join(tail))

    def group(self, name: str, env: dict[str, str], *extra: str) -> Any:
        out = self.work / f"{name}.json"
        argv = [sys.executable, "-m", "bench.group", name, "--profile", self.profile.name]
        self.call(name, [*argv, "--out", str(out), "--logs", str(self.logs), *extra], env)
        return json.loads(out.read_text())

    # -- databases ---------------------------------------------------------

    def prepare_template(self, leaves: list[list[str]]) -> str:
        name = f"{self.base}_template"
        marker = {"kind": "template", "leaves": leaves}
        if self.server.marker(name) != marker:
            say(f"migrating {name}")
            self.server.drop(name)
            self.server.create(name)
            self.made.add(name)
            manage = [sys.executable, "manage.py", "migrate", "--noinput", "-v0"]
            self.call("migrate", manage, self.env(database=name))
            self.server.set_marker(name, marker)
        self.made.add(name)
        return name

    def fresh(self, template: str) -> str:
        self.server.drop(self.base)
        self.server.create(self.base, template=template)
        self.made.add(self.base)
        return self.base

    def seeded(self, size: Seed, template: str, leaves: list[list[str]]) -> dict[str, Any]:
        name = f"{self.base}_{size.label}"
        wanted = {"kind": "seed", "leaves": leaves, "seed": size.label, "version": SEED_VERSION}
        marker = self.server.marker(name) or {}
        self.made.add(name)
        if not self.args.reseed and {key: marker.get(key) for key in wanted} == wanted:
            say(f"reusing {name}")
            return {"name": name, **marker}
        say(f"seeding {name}: {size.waiting_runs:,} waiting runs, {size.tasks:,} tasks")
        started = time.monotonic()
        self.server.drop(name)
        self.server.create(name, template=template)
        made = self.group(
            "seed",
            self.env(database=name),
            f"--waiting-runs={size.waiting_runs}",
            f"--tasks={size.tasks}",
        )
        marker = {**wanted, **made, "seconds": round(time.monotonic() - started, 1)}
        self.server.set_marker(name, marker)
        say(f"  seeded in {marker['seconds']:.0f} s")
        return {"name": name, **marker}

    def seeded_scale(self, runs: int, template: str, leaves: list[list[str]]) -> dict[str, Any]:
        """Return the scale group's database of `runs` finished runs, seeding it if needed."""
        name = f"{self.base}_scale_{runs}"
        wanted = {"kind": "scale", "leaves": leaves, "runs": runs, "version": SCALE_SEED_VERSION}
        marker = self.server.marker(name) or {}
        self.made.add(name)
        if not self.args.reseed and {key: marker.get(key) for key in wanted} == wanted:
            say(f"reusing {name}")
            return {"name": name, **marker}
        say(f"seeding {name}: {runs:,} finished runs over 3 years, made in the database")
        started = time.monotonic()
        self.server.drop(name)
        self.server.create(name, template=template)
        made = self.group("scale-seed", self.env(database=name), f"--runs={runs}")
        marker = {**wanted, **made, "seconds": round(time.monotonic() - started, 1)}
        self.server.set_marker(name, marker)
        say(f"  seeded in {marker['seconds']:.0f} s")
        return {"name": name, **marker}

    def cleanup(self) -> None:
        for name in sorted(self.made):
            self.server.drop(name)

    # -- the run -----------------------------------------------------------

    def run(self, groups: list[str]) -> tuple[dict[str, report.Result], dict[str, str]]:
        results: dict[str, report.Result] = {}
        failures: dict[str, str] = {}
        leaves = self.group("leaves", self.env(database=self.base))
        template = self.prepare_template(leaves)
        if {"sweep", "inbox"} & set(groups):
            try:
                seeds = self.retrying(
                    "seed",
                    lambda: {
                        "small": self.seeded(self.profile.small, template, leaves),
                        "large": self.seeded(self.profile.large, template, leaves),
                    },
                )
            except GroupFailed as error:
                failures.update(sweep=str(error), inbox=str(error))
            else:
                (self.work / "databases.json").write_text(json.dumps(seeds))
        if "scale" in groups:
            large_runs = self.args.scale_runs or self.profile.scale_large_runs
            try:
                scale_seeds = self.retrying(
                    "scale seed",
                    lambda: {
                        "scale_small": self.seeded_scale(
                            self.profile.scale_small_runs, template, leaves
                        ),
                        "scale_large": self.seeded_scale(large_runs, template, leaves),
                    },
                )
            except GroupFailed as error:
                failures.update(scale=str(error))
            else:
                (self.work / "scale_databases.json").write_text(json.dumps(scale_seeds))
        for name in groups:
            if name in failures:
                continue
            say(f"measuring {name}")
            started = time.monotonic()
            try:
                measured = self.retrying(name, lambda name=name: self.measure(name, template))
            except GroupFailed as error:
                failures[name] = str(error)
                continue
            for item in measured:
                results[item["key"]] = report.Result(**item)
            say(f"  done in {time.monotonic() - started:.0f} s")
        results.update(_beside_dbos(results))
        return results, failures

    def measure(self, name: str, template: str) -> list[dict[str, Any]]:
        if name == "scale":
            seeded = str(self.work / "scale_databases.json")
            return self.group(name, self.env(database=self.base), "--databases", seeded)
        if name in ("sweep", "inbox"):
            seeded = str(self.work / "databases.json")
            return self.group(name, self.env(database=self.base), "--databases", seeded)
        if name == "dbos":
            # DBOS makes its own tables, in a database of its own on the same server.
            database = f"{self.base}_dbos"
            self.server.drop(database)
            self.server.create(database)
            self.made.add(database)
            env = self.env(database=self.fresh(template))
            env["BENCH_DBOS_DATABASE_URL"] = url_for(self.server_url, database)
            return self.group(name, env)
        database = self.fresh(template)
        broker = self.broker_url if name == "celery" else "memory://"
        env = self.env(database=database, broker=broker, long_runs=name == "long")
        if name != "celery":
            # In-process figures are one step's own cost: each execute_step runs one
            # step, not the chain that eager dispatch would run after it.
            env["BATON_EAGER_STEPS"] = "0"
        return self.group(name, env)

    def retrying(self, name: str, attempt: Callable[[], T]) -> T:
        """Run `attempt`, once more if it fails (the server may have been restarted under
        it on a shared machine); the retry is reported under the table."""
        first_failure = ""
        for number in (1, 2):
            try:
                value = attempt()
            except (RuntimeError, psycopg.Error) as error:
                say(f"  {error}")
                if number == 2:
                    raise GroupFailed(_last_line(error)) from error
                first_failure = _last_line(error)
                say(f"  trying {name} once more")
                time.sleep(5)
            else:
                if first_failure:
                    self.retried[name] = first_failure
                return value
        raise AssertionError("unreachable")


def _beside_dbos(results: dict[str, report.Result]) -> dict[str, report.Result]:
    """Baton's in-process step and start over DBOS's, when both groups ran."""
    pairs = {
        "step_vs_dbos_ms": ("step_in_process_ms", "dbos_step_in_process_ms"),
        "start_vs_dbos_ms": ("start_p50_ms", "dbos_start_p50_ms"),
    }
    return {
        key: report.Result(key, results[baton].value, results[dbos].value)
        for key, (baton, dbos) in pairs.items()
        if baton in results and dbos in results
    }


def _last_line(error: Exception) -> str:
    return str(error).strip().splitlines()[-1].strip()[:300]


def say(text: str) -> None:
    print(text, flush=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller sizes: about a minute")
    size.add_argument("--tiny", action="store_true", help="smallest sizes, for CI")
    parser.add_argument(
        "--only", action="append", choices=report.GROUPS, help="run only this group (repeatable)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--database",
        default=os.environ.get("BENCH_DATABASE") or "baton_bench",
        help="base name of the benchmark's databases (default baton_bench)",
    )
    parser.add_argument("--reseed", action="store_true", help="rebuild the seeded databases")
    parser.add_argument(
        "--scale-runs",
        type=int,
        metavar="N",
        help="finished runs in the scale group's large database (default: the profile's)",
    )
    parser.add_argument(
        "--cleanup", action="store_true", help="drop the databases this run used, at the end"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    stop_on_signals()
    profile = PROFILES["tiny" if args.tiny else "quick" if args.quick else "full"]
    groups = [
        name
        for name in report.GROUPS
        if (name in args.only if args.only else name not in report.OPT_IN or args.tiny)
    ]
    driver = Driver(args, profile)
    say(f"bench: {profile.name} profile, groups {', '.join(groups)}; logs in {driver.logs}")
    started = time.monotonic()
    results: dict[str, report.Result] = {}
    failures: dict[str, str] = {}
    try:
        results, failures = driver.run(groups)
    except (RuntimeError, psycopg.Error) as error:
        failures = {name: _last_line(error) for name in groups}
        say(str(error))
    finally:
        if args.cleanup:
            driver.cleanup()
    table = [row for row in report.rows(results=results, failures=failures) if row.group in groups]
    seconds = time.monotonic() - started
    header = (
        f"Baton benchmarks, {profile.name} profile, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{os.cpu_count()} cores, {seconds:.0f} s"
    )
    print()
    print(report.render(table, header=header, failures=failures, retried=driver.retried))
    meta = {
        "profile": profile.as_dict(),
        "groups": groups,
        "failures": failures,
        "retried": driver.retried,
        "seconds": round(seconds, 1),
        "started": driver.stamp,
        "cpu_count": os.cpu_count(),
        "logs": str(driver.logs),
    }
    paths = [driver.out / f"results-{driver.stamp}.json", driver.out / "latest.json"]
    for path in [*paths, *([args.json] if args.json else [])]:
        report.write_json(path, table=table, meta=meta)
    say(f"\nwrote {paths[0]} and {paths[1]}")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("\ninterrupted: the workers and servers this run started are stopped")
        sys.exit(130)
