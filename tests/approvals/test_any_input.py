"""No input makes a 5xx: arbitrary text and dates in every form and query parameter.

Hypothesis sends text of any kind (NUL and other control characters, any script,
over-long), ISO dates at the ends of the calendar with offsets up to ±23:59, and
cursors carrying such dates, to the inbox, the user picker, saved filters, the
away form and the API's list endpoints. Every answer is below 500, and every
refusal says what was wrong: an inline alert on a page, a sentence from the
picker, a problem+json detail from the API. The one place they all pass through
is workflows.cleaning.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone

import pytest
from django.test import Client
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from workflows.tokens import issue_token

pytestmark = pytest.mark.django_db

EXAMPLES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
EDGES = [
    "\x00",
    "a\x00b",
    "\u202e",
    "0001-01-01T00:00:00+05:00",
    "9999-12-31T23:59:59-05:00",
    "2026-01-01T00:00:00+23:00",
    "0001-01-01",
    "9999-12-31",
    "0.5",
    "x" * 5000,
]
OFFSETS = st.timedeltas(
    min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59)
)
DATES = st.one_of(
    st.builds(
        lambda moment, offset: moment.replace(tzinfo=timezone(offset)).isoformat(),
        st.datetimes(),
        OFFSETS,
    ),
    st.datetimes().map(datetime.isoformat),
    st.dates().map(lambda day: day.isoformat()),
)
TEXT = st.one_of(st.text(max_size=300), st.sampled_from(EDGES), DATES)


def encoded(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


# What an outside probe sent to each, every one a 500 once: always tried.
YEAR_1 = "0001-01-01T00:00:00+05:00"
YEAR_9999 = "9999-12-31T23:59:59-05:00"
A_TASK = "00000000-0000-0000-0000-000000000001"


CURSORS = st.one_of(
    TEXT,
    st.builds(lambda due, task: encoded([due, task]), TEXT, st.uuids().map(str) | TEXT),
    st.builds(
        lambda priority, due, task: encoded([priority, due, task]),
        st.integers(-5, 5) | st.booleans(),
        TEXT,
        st.uuids().map(str),
    ),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3),
        max_leaves=5,
    ).map(encoded),
)


def query(**parameters: st.SearchStrategy) -> st.SearchStrategy[dict[str, str]]:
    """Any subset of the named parameters, each with a value from its strategy."""
    return st.fixed_dictionaries({}, optional=parameters)


def says_why_on_a_page(response) -> bool:
    """An inline alert, or an error among the page's messages."""
    return 'role="alert"' in response.text or '<li class="error">' in response.text


def says_why_as_a_problem(response) -> bool:
    body = response.json()
    return response["Content-Type"] == "application/problem+json" and bool(body["detail"])


@pytest.fixture
def browser(carol, manager_task) -> Client:
    client = Client()
    client.force_login(carol)
    return client


@pytest.fixture
def api(carol, manager_task) -> Client:
    _, secret = issue_token(user=carol)
    return Client(headers={"Authorization": f"Bearer {secret}"})


class TestPages:
    @EXAMPLES
    @given(
        params=query(
            tab=TEXT, q=TEXT, type=TEXT, priority=TEXT, sla=TEXT, sort=TEXT, cursor=CURSORS
        )
    )
    @example(params={"cursor": encoded([YEAR_1, A_TASK])})
    @example(params={"cursor": base64.urlsafe_b64encode(b"[" * 3000).decode()})
    @example(params={"q": "a\x00b", "type": "\x00"})
    def test_the_inbox_answers_every_query(self, browser, params):
        response = browser.get("/", params)

        assert response.status_code in (200, 400)
        if response.status_code == 400:
            assert says_why_on_a_page(response)

    @EXAMPLES
    @given(term=TEXT)
    @example(term="b\x00")
    def test_the_user_picker_answers_every_name(self, browser, term):
        response = browser.get("/users/", {"to": term})

        assert response.status_code in (200, 400)
        if response.status_code == 400:
            assert response.text.startswith("The name must")

    @EXAMPLES
    @given(name=TEXT, saved_query=TEXT)
    @example(name="a\x00", saved_query="q=x")
    @example(name="a", saved_query="q=x\x00")
    def test_saving_a_filter_is_done_or_refused_saying_why(self, browser, name, saved_query):
        response = browser.post("/filters/save/", {"name": name, "query": saved_query}, follow=True)

        assert response.status_code in (200, 400)
        assert "Saved the filter" in response.text or says_why_on_a_page(response)

    @EXAMPLES
    @given(substitute=TEXT, starts=DATES | TEXT, ends=DATES | TEXT)
    @example(substitute="bob", starts=YEAR_1, ends="2026-12-05")
    @example(substitute="bob", starts="2026-12-01", ends=YEAR_9999)
    def test_the_away_form_is_done_or_refused_saying_why(
        self, browser, bob, substitute, starts, ends
    ):
        response = browser.post(
            "/away/", {"substitute": substitute, "starts_at": starts, "ends_at": ends}
        )

        assert response.status_code in (302, 422)
        if response.status_code == 422:
            assert says_why_on_a_page(response)


class TestApiLists:
    @EXAMPLES
    @given(
        params=query(
            tab=TEXT, q=TEXT, type=TEXT, priority=TEXT, sla=TEXT, sort=TEXT, cursor=CURSORS
        )
    )
    @example(params={"cursor": encoded([YEAR_1, A_TASK])})
    def test_the_task_list_answers_every_query(self, api, params):
        response = api.get("/api/v1/tasks", params)

        assert response.status_code in (200, 400, 414, 422)
        if response.status_code != 200:
            assert says_why_as_a_problem(response)

    @EXAMPLES
    @given(
        params=query(
            state=TEXT,
            type=TEXT,
            correlation_id=TEXT,
            started_after=DATES | TEXT,
            cursor=CURSORS,
            limit=TEXT,
        )
    )
    @example(params={"started_after": YEAR_1})
    @example(params={"started_after": YEAR_9999})
    @example(params={"cursor": encoded(["2026-01-01T00:00:00+23:00", A_TASK])})
    def test_the_run_list_answers_every_query(self, api, params):
        response = api.get("/api/v1/workflows", params)

        assert response.status_code in (200, 400, 414, 422)
        if response.status_code != 200:
            assert says_why_as_a_problem(response)
