"""Every unhandled error is logged, with the id of its request, whatever DEBUG says."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from django.test import Client

from approvals.inbox import selectors
from config.request_ids import HEADER
from workflows import api as workflows_api
from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def stderr() -> Iterator[io.StringIO]:
    """What the configured console handler writes (to stderr in production), captured."""
    handler = next(
        handler
        for handler in logging.getLogger("django").handlers
        if isinstance(handler, logging.StreamHandler)
    )
    captured = io.StringIO()
    previous = handler.setStream(captured)
    yield captured
    handler.setStream(previous)


@pytest.fixture
def browser(carol) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(carol)
    return client


def breaks(monkeypatch, module, name: str) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(module, name, broken)


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


class TestRequestIds:
    def test_each_answer_carries_a_new_id(self, browser):
        first = browser.get("/")
        second = browser.get("/")

        assert len(first[HEADER]) == 32
        assert first[HEADER] != second[HEADER]

    def test_a_well_formed_id_from_the_proxy_is_kept(self, browser):
        response = browser.get("/", headers={HEADER: "edge-7f3a.42"})

        assert response[HEADER] == "edge-7f3a.42"

    def test_a_malformed_id_is_replaced(self, browser):
        response = browser.get("/", headers={HEADER: "<script>" + "x" * 200})

        assert len(response[HEADER]) == 32


class TestUnhandledErrors:
    def test_a_page_that_fails_is_logged_with_its_traceback_and_request_id(
        self, browser, monkeypatch, caplog, settings
    ):
        settings.DEBUG = False
        breaks(monkeypatch, selectors, "inbox_with_header")

        with caplog.at_level(logging.ERROR, logger="django.request"):
            response = browser.get("/")

        assert response.status_code == 500
        [record] = [r for r in caplog.records if r.name == "django.request"]
        assert record.levelno == logging.ERROR
        assert record.exc_info[0] is RuntimeError
        assert record.request_id == response[HEADER]

    def test_the_line_reaches_stderr_as_json_with_the_id(self, browser, monkeypatch, stderr):
        breaks(monkeypatch, selectors, "inbox_with_header")

        response = browser.get("/")

        [line] = [line for line in lines(stderr) if line["name"] == "django.request"]
        assert line["levelname"] == "ERROR"
        assert line["request_id"] == response[HEADER]
        assert "RuntimeError: a bug" in line["exc_info"]

    def test_an_api_call_that_fails_is_logged_with_the_id_it_answers_with(
        self, alice, monkeypatch, stderr
    ):
        _, secret = issue_token(user=alice)
        breaks(monkeypatch, workflows_api, "visible_runs")

        response = Client().get("/api/v1/workflows", headers={"Authorization": f"Bearer {secret}"})

        assert response.status_code == 500
        assert response["Content-Type"] == "application/problem+json"
        ids = {line["request_id"] for line in lines(stderr) if line["levelname"] == "ERROR"}
        assert ids == {response[HEADER]}

    def test_a_refusal_is_not_logged_as_an_error(self, browser, stderr):
        browser.get("/tasks/00000000-0000-0000-0000-000000000000/")

        assert [line for line in lines(stderr) if line["name"] == "django.request"] == []
