"""Seal every personal value again under the newest of BATON_DATA_KEYS (approvals.privacy)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from approvals import privacy
from workflows import personal


class Command(BaseCommand):
    help = (
        "Re-encrypt every sealed personal value with the first key of BATON_DATA_KEYS, so "
        "that the keys after it can be removed once this has finished; first seal the "
        "values of fields marked personal that were stored in clear, before their type "
        "marked them (after an upgrade). Values the first key sealed already are left as "
        "they are: safe to run again, and to interrupt."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self.stdout.write(f"Keys: {personal.key_source()}")
            sealed = privacy.seal_plaintext(progress=self.stdout.write)
            counts = privacy.rotate_data_keys(progress=self.stdout.write)
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"Sealed {sum(sealed.values())} value(s) stored in clear, and "
            f"{sum(counts.values())} value(s) again under the newest key; the older keys may "
            "now be removed from BATON_DATA_KEYS."
        )
