"""Verifying the audit chain behind PgBouncer in transaction mode.

Verification reads the whole chain with `.iterator()`, which Django runs as a
server-side cursor unless DISABLE_SERVER_SIDE_CURSORS is set; behind PgBouncer
such a cursor would live on one server connection while its fetches went to
another. The tests are tests/approvals/test_audit.py's own, inherited whole,
with every query through PgBouncer (tests/pgbouncer.py).
"""

from __future__ import annotations

import pytest

import tests.approvals.test_audit as audit_tests
from tests.approvals.test_audit import decided  # noqa: F401  (a fixture the tests use)

# e2e: they start a PgBouncer process (tests/pgbouncer.py).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]


@pytest.fixture(autouse=True)
def every_query_through_pgbouncer(through_pgbouncer) -> None:
    """Send every query of these tests through PgBouncer."""


class TestVerifyAuditBehindPgBouncer(audit_tests.TestVerifyAudit):
    pass
