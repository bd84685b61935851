"""The inbox under load, with few and with many tasks in the system, against a bare page.

gunicorn serves both the inbox (`/`) and the bare 25-row page (`/bench/bare/`),
same workers and threads, on 127.0.0.1; 8 keep-alive connections load each page
for a fixed time, signed in as the seeded reviewer (1,000 live tasks of theirs), the
pages taking turns so that each meets the same moments of a shared machine.
The deep page is the one reached by following "Next page" `deep_pages` times.
The first page is loaded twice: warm, each process keeping the rows it drew
(approvals.inbox.rows), and cold, from a second gunicorn with
BATON_INBOX_ROW_CACHE=false, which draws every row of every answer afresh.
Queries per page are counted in-process with Django's test client, with many tasks.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench import databases, processes, seed
from bench.load import Load, generate
from bench.measure import percentile
from bench.profiles import Profile
from bench.report import Result
from bench.switch import using_database

CONNECTIONS = 8
GUNICORN_WORKERS = 2
GUNICORN_THREADS = 4
# Turns each page takes at being loaded (see _interleaved).
ROUNDS = 4
BARE = "/bench/bare/"
FIRST = "/"
QUEUE = "/?tab=queue"
_NEXT = re.compile(r'href="([^"]+)" rel="next"')


def _client() -> Client:
    return Client(HTTP_HOST="127.0.0.1")


def sign_in() -> tuple[Client, str]:
    """Sign the reviewer in (a real session row); return the client and its cookie header."""
    client = _client()
    client.force_login(User.objects.get(username=seed.REVIEWER))
    cookie = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    return client, cookie


def deep_page(*, client: Client, pages: int) -> tuple[str, int]:
    """Follow "Next page" up to `pages` times from the first page; return the path and count."""
    path, followed = FIRST, 0
    for _ in range(pages):
        response = client.get(path)
        found = _NEXT.search(response.content.decode())
        if found is None:
            break
        path = FIRST + html.unescape(found.group(1))
        followed += 1
    return path, followed


def queries(*, client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    if response.status_code != 200:
        raise RuntimeError(f"GET {path} answered {response.status_code}")
    return len(captured.captured_queries)


def _interleaved(
    pages: dict[str, tuple[int, str]], *, cookie: str, seconds: float
) -> dict[str, Load]:
    """Load each of `pages` (name: port and path) for `seconds` in all, in ROUNDS turns taken
    in order, after a warm-up of a quarter of that each. Measured one after another, a
    neighbour's burst fell on one page's whole window and not on its baseline's (the bare
    page alone ranged 278-573 requests/s in three runs of one quiet hour); taking turns, every
    page meets the same moments of the machine."""
    for port, path in pages.values():
        generate(port=port, path=path, cookie=cookie, connections=CONNECTIONS, seconds=seconds / 4)
    loads = {name: Load() for name in pages}
    for _ in range(ROUNDS):
        for name, (port, path) in pages.items():
            turn = generate(
                port=port,
                path=path,
                cookie=cookie,
                connections=CONNECTIONS,
                seconds=seconds / ROUNDS,
            )
            loads[name].latencies_ms.extend(turn.latencies_ms)
            loads[name].errors.extend(turn.errors)
            loads[name].seconds += turn.seconds
    for name, load in loads.items():
        if not load.latencies_ms:
            raise RuntimeError(f"no successful request to {pages[name][1]}: {load.errors[:3]}")
    return loads


def _stats(load: Load) -> dict[str, Any]:
    return {
        "p50_ms": percentile(load.latencies_ms, 0.5),
        "p95_ms": percentile(load.latencies_ms, 0.95),
        "per_s": load.per_second,
        "requests": len(load.latencies_ms),
        "errors": len(load.errors),
    }


def measure(*, database: str, profile: Profile, logs: Path, in_detail: bool) -> dict[str, Any]:
    server_url = os.environ["DATABASE_URL"]
    out: dict[str, Any] = {}
    with using_database(database):
        client, cookie = sign_in()
        if in_detail:
            deep, out["followed"] = deep_page(client=client, pages=profile.deep_pages)
            out["queries"] = {
                "bare": queries(client=client, path=BARE),
                "first": queries(client=client, path=FIRST),
                "deep": queries(client=client, path=deep),
                "queue": queries(client=client, path=QUEUE),
            }
        connection.close()
    with processes.Children(env={**os.environ}, logs=logs) as children:
        port = processes.gunicorn(
            children,
            f"gunicorn-{database}",
            database_url=databases.url_for(server_url, database),
            workers=GUNICORN_WORKERS,
            threads=GUNICORN_THREADS,
        )
        cold_port = processes.gunicorn(
            children,
            f"gunicorn-{database}-cold",
            database_url=databases.url_for(server_url, database),
            workers=GUNICORN_WORKERS,
            threads=GUNICORN_THREADS,
            env={"BATON_INBOX_ROW_CACHE": "false"},
        )
        pages = {"bare": (port, BARE), "first": (port, FIRST), "cold": (cold_port, FIRST)}
        if in_detail:
            pages["deep"] = (port, deep)
        loads = _interleaved(pages, cookie=cookie, seconds=profile.load_seconds)
        out.update({name: _stats(load) for name, load in loads.items()})
    return out


def run(*, profile: Profile, seeded: dict[str, dict[str, Any]], logs: Path) -> list[Result]:
    small = measure(database=seeded["small"]["name"], profile=profile, logs=logs, in_detail=False)
    large = measure(database=seeded["large"]["name"], profile=profile, logs=logs, in_detail=True)
    few, many = f"{profile.small.tasks:,} tasks", f"{profile.large.tasks:,} tasks"
    setup = (
        f"gunicorn {GUNICORN_WORKERS} workers x {GUNICORN_THREADS} threads, {CONNECTIONS} "
        f"connections, {profile.load_seconds:g} s each; both pages require login (session + user)"
    )
    errors = sum(
        side[page]["errors"] for side in (small, large) for page in ("bare", "first", "cold")
    )
    counts = large["queries"]
    login = counts["bare"]
    return [
        Result(
            "bare_rps",
            large["bare"]["per_s"],
            note=f"{setup}; {small['bare']['per_s']:.0f}/s beside {few}"
            + (f"; {errors} failed requests" if errors else ""),
            samples=large["bare"]["requests"],
        ),
        Result(
            "inbox_p50_small_ms",
            small["first"]["p50_ms"],
            small["bare"]["p50_ms"],
            note=f"{few}: the reviewer's 800 claimed + 200 in their group's queue",
            samples=small["first"]["requests"],
        ),
        Result("inbox_p95_small_ms", small["first"]["p95_ms"], small["bare"]["p95_ms"]),
        Result(
            "inbox_p50_large_ms",
            large["first"]["p50_ms"],
            small["first"]["p50_ms"],
            note=f"{many}, other people's 95% completed",
            samples=large["first"]["requests"],
        ),
        Result("inbox_p95_large_ms", large["first"]["p95_ms"], small["first"]["p95_ms"]),
        Result("inbox_rps_small", small["first"]["per_s"], small["bare"]["per_s"]),
        Result("inbox_rps_large", large["first"]["per_s"], large["bare"]["per_s"]),
        Result(
            "inbox_rps_small_cold",
            small["cold"]["per_s"],
            small["bare"]["per_s"],
            note="row cache off (BATON_INBOX_ROW_CACHE=false): every row drawn afresh",
            samples=small["cold"]["requests"],
        ),
        Result(
            "inbox_rps_large_cold",
            large["cold"]["per_s"],
            large["bare"]["per_s"],
            samples=large["cold"]["requests"],
        ),
        Result("inbox_p95_large_cold_ms", large["cold"]["p95_ms"], large["first"]["p95_ms"]),
        Result(
            "inbox_deep_p50_ms",
            large["deep"]["p50_ms"],
            large["first"]["p50_ms"],
            note=f"page {large['followed'] + 1}, reached by following Next "
            f"{large['followed']} times",
            samples=large["deep"]["requests"],
        ),
        Result(
            "inbox_queries_first",
            counts["first"] - login,
            login,
            note=f"in-process test client; the bare page's {login} are the session and "
            f"the user; the inbox's total is the figure + {login}",
        ),
        Result("inbox_queries_deep", counts["deep"] - login, login),
        Result("inbox_queries_queue", counts["queue"] - login, login),
    ]
