"""The API against its own OpenAPI document: a schemathesis run over a live server.

schemathesis's command line generates requests from /api/v1/openapi.json (a
bounded number per operation) and checks that none gets a 5xx and every response
fits the documented status codes, content types and schemas.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflows.tokens import issue_token

pytestmark = pytest.mark.e2e

EXAMPLES = os.environ.get("BATON_SCHEMATHESIS_EXAMPLES", "15")
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


def test_no_generated_request_breaks_the_contract(live_server, people, manager_task, tmp_path):
    _, secret = issue_token(user=people["carol"])  # carol has a waiting expense task

    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{live_server.url}/api/v1/openapi.json",
            "--header",
            f"Authorization: Bearer {secret}",
            "--max-examples",
            EXAMPLES,
            "--seed",
            "1",
            "--workers",
            "1",
            # Business rules the schema cannot state (a rejection needs a reason, a
            # delegate must exist, a cursor must be one we gave out, an input must fit
            # its workflow type's own schema) answer 4xx to schema-valid requests by
            # design; every other check runs.
            "--exclude-checks",
            "positive_data_acceptance",
            "--report",
            "junit",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )

    Path("/tmp/schemathesis-last.txt").write_text(result.stdout)
    print(result.stdout[-4000:])
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
