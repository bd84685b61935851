"""The audit benchmark's seeder writes a chain Baton itself accepts, anchored as beat would."""

from __future__ import annotations

import pytest
from django.utils import timezone

from approvals import audit
from approvals.audit import verify_export
from bench.audit_export import Seeder

pytestmark = pytest.mark.django_db


class TestSeeder:
    def test_entries_seeded_in_bulk_form_a_chain_that_verifies_up_to_its_checkpoint(self):
        seeder = Seeder()

        seeder.append(30)
        seeder.anchor()
        seeder.append(20)
        seeder.anchor()

        report = audit.verify_audit_chain()
        assert report.intact, report.problem
        assert (report.entries, report.checkpoints, report.holding.entries) == (50, 2, 50)

    def test_their_export_verifies_offline(self):
        seeder = Seeder()
        seeder.append(25)
        seeder.anchor()

        export = audit.start_export(filters=audit.ExportFilters(), format="csv", now=timezone.now())
        text = "".join(export.chunks())

        report = verify_export.verify_export(
            text.splitlines(keepends=True), key=audit.chain_key(), format="csv"
        )
        assert (report.entries, report.linked, report.gaps) == (25, 25, 0)
