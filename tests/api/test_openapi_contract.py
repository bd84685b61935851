"""The API against its own OpenAPI document: a schemathesis run over a live server.

schemathesis's command line generates requests from /api/v1/openapi.json (a
bounded number per operation) and checks that none gets a 5xx and every response
fits the documented status codes, content types and schemas.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workflows.tokens import issue_token

pytestmark = pytest.mark.e2e

EXAMPLES = os.environ.get("BATON_SCHEMATHESIS_EXAMPLES", "15")
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


# A request that breaks the schema must be refused with one of these. schemathesis's
# own list lacks 413 and 414, which the API answers (as documented) to a body or a
# query string past its limits, before it reads any field.
REFUSALS = [
    *("400", "401", "403", "404", "405", "406", "409", "413", "414", "415", "422", "428", "429"),
    "5xx",  # not_a_server_error reports these
]


def test_no_generated_request_breaks_the_contract(
    live_server, people, manager_task, tmp_path, settings
):
    # schemathesis sends bad credentials to every operation, all from this one address,
    # and expects 401 each time; the lockout they would reach is test_token_throttling's.
    settings.AXES_FAILURE_LIMIT = 10_000
    _, secret = issue_token(user=people["carol"])  # carol has a waiting expense task
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        f"[checks.negative_data_rejection]\nexpected-statuses = {json.dumps(REFUSALS)}\n"
    )

    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
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
