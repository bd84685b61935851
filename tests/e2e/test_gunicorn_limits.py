"""Over-long requests against real gunicorn, as configured by gunicorn.conf.py.

The API's own limit (4096 characters of query string) answers as problem+json;
only a request line past gunicorn's 8190 bytes meets gunicorn's plain 414.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import BIN, ROOT, end_process, scaled
from tests.ports import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory, process_env) -> Iterator[int]:
    """gunicorn serving Baton on 127.0.0.1, started from the checkout like the image does,
    on the test database (a web refuses to start on one that is not migrated)."""
    port = free_port()
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    env = {
        **process_env,
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "gunicorn-limits-test-only",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
    }
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(BIN / "gunicorn"), "config.wsgi:application", "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + scaled(30)
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
        yield port
    finally:
        end_process(process, grace=30)


def get(port: int, query_length: int) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/api/v1/workflows?q=" + "a" * query_length)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


class TestOverLongRequests:
    def test_a_query_string_past_the_apis_limit_gets_a_problem(self, server):
        response = get(server, 6000)

        assert response.status == 414
        assert response.getheader("Content-Type") == "application/problem+json"

    def test_a_request_line_past_gunicorns_limit_gets_gunicorns_414(self, server):
        response = get(server, 9000)

        assert response.status == 414
        assert response.getheader("Content-Type") != "application/problem+json"
