"""Point Django's default connection at another of the benchmark's databases for a while."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def using_database(name: str) -> Iterator[None]:
    """Close the default connection and reopen it on database `name` inside the block."""
    original = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = name
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original
