"""A real OpenID Connect provider for the single sign-on tests: tests/oidc/provider.mjs,
panva's oidc-provider under Node, started on a loopback port.

`make test` installs it (`npm ci` in tests/oidc). Its people are a JSON file that
the tests rewrite between sign-ins, as an administrator would change the directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "oidc"
CLIENT_ID = "baton-tests"
CLIENT_SECRET = "tests-only-client-secret"
AUDIENCE = "https://baton.example/api"


def node_and_package() -> str:
    """Return the node binary; fail with what to do when the provider is not installed."""
    node = shutil.which("node")
    if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
        raise RuntimeError(
            "The single sign-on tests need Node and tests/oidc's packages: `make test` "
            "installs them (apt-get install nodejs npm; npm ci --prefix tests/oidc)."
        )
    return node


class People:
    """The provider's directory: a JSON file of people, read at every sign-in."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.people: dict[str, dict[str, Any]] = {}

    def add(self, username: str, *, password: str, groups: list[str], **claims: Any) -> None:
        self.people[username] = {
            "password": password,
            "email": f"{username}@example.com",
            "given_name": username.title(),
            "family_name": "Tester",
            "groups": groups,
            **claims,
        }
        self._save()

    def set_groups(self, username: str, groups: list[str]) -> None:
        self.people[username]["groups"] = groups
        self._save()

    def _save(self) -> None:
        temporary = self.path.with_suffix(".new")
        temporary.write_text(json.dumps(self.people))
        temporary.replace(self.path)  # never half a file for a sign-in to read


def settings_for(issuer: str) -> dict[str, Any]:
    """The Django settings that point Baton at the provider, as BATON_OIDC_* would."""
    return {
        "BATON_OIDC_CLIENT_ID": CLIENT_ID,
        "BATON_OIDC_ENABLED": True,
        "BATON_OIDC_ISSUER": issuer,
        "BATON_OIDC_PROVIDER_NAME": "the test provider",
        "BATON_OIDC_API_AUDIENCE": AUDIENCE,
        "OIDC_RP_CLIENT_ID": CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{issuer}/auth",
        "OIDC_OP_TOKEN_ENDPOINT": f"{issuer}/token",
        "OIDC_OP_USER_ENDPOINT": "",
        "OIDC_OP_JWKS_ENDPOINT": f"{issuer}/jwks",
        "OIDC_RP_SCOPES": "openid email profile groups",
    }
