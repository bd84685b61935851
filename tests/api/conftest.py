"""API clients for the personas: each with a Bearer token of their own."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from workflows.tokens import issue_token


class ApiClient:
    """A JSON client that speaks as one user through a Bearer token."""

    def __init__(self, secret: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {secret}"} if secret else {}

    def get(self, path: str, **params: Any):
        return self.client.get(f"/api/v1{path}", params, headers=self.headers)

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None):
        return self.client.post(
            f"/api/v1{path}",
            body if body is not None else {},
            content_type="application/json",
            headers={**self.headers, **(headers or {})},
        )

    def put(self, path: str, body: Any):
        return self.client.put(
            f"/api/v1{path}", body, content_type="application/json", headers=self.headers
        )

    def delete(self, path: str):
        return self.client.delete(f"/api/v1{path}", headers=self.headers)


@pytest.fixture
def api_as(people):
    def client_for(username: str | None) -> ApiClient:
        if username is None:
            return ApiClient(None)
        _, secret = issue_token(user=people[username])
        return ApiClient(secret)

    return client_for


@pytest.fixture
def operator_api(olga, api_as) -> ApiClient:
    """A client for olga, who may view and operate every run."""
    olga.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_workflowrun", "operate_workflowrun"])
    )
    return api_as("olga")
