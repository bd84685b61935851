"""The WSGI application: what building it leaves ready before the first request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
# Modules only the URL configuration imports: the API and the inbox's views.
IMPORTED_BY_URLS = ("config.api", "approvals.inbox.views")


class TestBuildingTheApplication:
    def test_imports_the_url_configuration_before_any_request(self):
        # An unreachable database: building the application must not need one for this.
        script = (
            "import sys, config.wsgi; "
            f"print(all(name in sys.modules for name in {IMPORTED_BY_URLS!r}))"
        )

        built = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )

        assert built.returncode == 0, built.stderr
        assert built.stdout.strip() == "True"


def _environment() -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_SECRET_KEY": "x" * 50,
        "BATON_DATA_KEYS_DERIVED": "true",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nowhere",
        "CELERY_BROKER_URL": "memory://",
    }
