"""The inbox's filters form, drawn once per process for each set of filters, offers the
workflow types registered when the page is drawn (approvals.inbox.views._filters_form)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.approvals.conftest import AUDITED
from workflows import registry

pytestmark = pytest.mark.django_db

OPTION = '<option value="test_audited" >'


class TestTheFiltersForm:
    def test_offers_a_type_registered_or_dropped_after_it_was_first_drawn(self, client, bob):
        client.force_login(bob)
        before = client.get(reverse("approvals:inbox")).text
        registry.register(AUDITED)
        try:
            registered = client.get(reverse("approvals:inbox")).text
        finally:
            registry.unregister(AUDITED)
        dropped = client.get(reverse("approvals:inbox")).text

        assert OPTION not in before
        assert f"{OPTION}Test audited</option>" in registered
        assert OPTION not in dropped
