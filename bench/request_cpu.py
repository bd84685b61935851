"""CPU per request of the inbox beside the bare page, in-process: `python -m bench.request_cpu`.

The inbox group's requests per second move with whatever else the machine runs;
the CPU a request costs moves much less. This calls Django's WSGI handler (every
middleware, the session and the user, as gunicorn would) for the bare page and
the inbox's first page in turns, signed in as the seeded reviewer, and prints
the Python process's CPU per request and, when PostgreSQL runs on this machine,
its server process's (read from /proc). Rounds alternate the two pages, so a
burst of load elsewhere weighs on both; their ratio is the figure to compare.

Point DATABASE_URL at a database the inbox group seeded (`python -m bench --quick
--only inbox` keeps them: <BENCH_DATABASE>_r100000_t100000 is the one with many
tasks). BATON_INBOX_ROW_CACHE=false measures the cold page. `--profile` prints
cProfile's call count per request instead (exact from one run to the next).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

PAGES = {"bare": "/bench/bare/", "inbox": "/"}
WARM_UP = 50


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_cpu")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200, help="per page and round")
    parser.add_argument("--profile", action="store_true", help="count function calls instead")
    args = parser.parse_args(argv)
    call = _signed_in_caller()
    for path in PAGES.values():
        for _ in range(WARM_UP):
            call(path)
    if args.profile:
        for name, path in PAGES.items():
            print(f"{name}: {_calls(call, path, args.requests):.0f} function calls per request")
        return 0
    cpu: dict[str, list[float]] = {name: [] for name in PAGES}
    server: dict[str, list[float]] = {name: [] for name in PAGES}
    for _ in range(args.rounds):
        for name, path in PAGES.items():
            server_before, before = _server_seconds(), time.process_time()
            for _ in range(args.requests):
                call(path)
            cpu[name].append((time.process_time() - before) / args.requests * 1e3)
            server[name].append((_server_seconds() - server_before) / args.requests * 1e3)
    ratios = [inbox / bare for inbox, bare in zip(cpu["inbox"], cpu["bare"], strict=True)]
    print(f"{args.rounds} rounds of {args.requests} requests a page, ms per request:")
    for name in PAGES:
        print(
            f"  {name}: Python CPU min {min(cpu[name]):.3f}, median "
            f"{statistics.median(cpu[name]):.3f}; server CPU median "
            f"{statistics.median(server[name]):.3f}"
        )
    print(
        f"  inbox / bare, Python CPU: median of the rounds' ratios {statistics.median(ratios):.2f}"
    )
    return 0


def _signed_in_caller() -> Callable[[str], None]:
    """Set Django up as the bench's gunicorn is, sign the reviewer in, and return a
    function that GETs a path through the WSGI handler and checks it answered 200."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-" + "x" * 50)
    os.environ.setdefault(
        "BATON_WORKFLOW_MODULES",
        "workflows.examples.order,approvals.examples,bench.definitions",
    )
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from django.test import Client

    from bench import seed

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(User.objects.get(username=seed.REVIEWER))
    cookie = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    # One server process for the whole measure, whose CPU /proc tells.
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = None
    handler = WSGIHandler()

    def call(path: str) -> None:
        statuses: list[str] = []
        environ = {
            "REQUEST_METHOD": "GET",
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_COOKIE": cookie,
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.input": io.BytesIO(b""),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
        }
        b"".join(handler(environ, lambda status, headers, *_: statuses.append(status)))
        if not statuses[0].startswith("200"):
            raise RuntimeError(f"GET {path} answered {statuses[0]}")

    return call


def _server_seconds() -> float:
    """CPU seconds the default connection's server process has used (0 if not local)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return 0.0
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _calls(call: Callable[[str], None], path: str, requests: int) -> float:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(requests):
        call(path)
    profile.disable()
    return pstats.Stats(profile).total_calls / requests  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
