"""GET /api/v1/openapi.json: anyone may ask for it, so it is built once per language and set
of registered definitions, not per request, and stays right when either changes."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest

from approvals.task_forms import document_task_forms
from tests.workflows.definitions import RECEIPT_REQUIRED
from workflows import registry

pytestmark = pytest.mark.django_db

URL = "/api/v1/openapi.json"
NEW_TYPE = replace(RECEIPT_REQUIRED, name="test_documented_later")
NEW_FORM = "TaskForm_test_documented_later_v1_pay"


@pytest.fixture
def new_type():
    registry.register(NEW_TYPE)
    yield NEW_TYPE
    registry.unregister(NEW_TYPE)


def test_a_second_request_is_answered_without_building_the_document_again(client):
    first = client.get(URL)

    with mock.patch("config.api.document_task_forms", wraps=document_task_forms) as built:
        again = [client.get(URL) for _ in range(3)]

    assert built.call_count == 0
    assert first.status_code == 200
    assert all(response.json() == first.json() for response in again)


def test_a_type_registered_later_is_documented_on_the_next_request(client):
    before = client.get(URL).json()
    registry.register(NEW_TYPE)
    try:
        during = client.get(URL).json()
    finally:
        registry.unregister(NEW_TYPE)
    after = client.get(URL).json()

    assert NEW_FORM not in before["components"]["schemas"]
    assert NEW_FORM in during["components"]["schemas"]
    assert NEW_FORM not in after["components"]["schemas"]


def test_each_language_is_served_its_own_document(client):
    english = client.get(URL, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    german = client.get(URL, HTTP_ACCEPT_LANGUAGE="de").content.decode()
    english_again = client.get(URL, HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "Cost centre" in english
    assert "Kostenstelle" not in english
    assert "Kostenstelle" in german
    assert "Cost centre" not in german
    assert english_again == english


def test_a_caller_that_changes_its_copy_changes_nobody_elses(client, new_type):
    from config.api import api

    mine = api.get_openapi_schema(path_prefix="/api/v1/")
    mine["components"]["schemas"].clear()

    assert NEW_FORM in api.get_openapi_schema(path_prefix="/api/v1/")["components"]["schemas"]
    assert NEW_FORM in client.get(URL).json()["components"]["schemas"]
