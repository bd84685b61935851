"""The inbox's rows: drawn from their values alone, without a form of their own, each the
HTML its template draws for it, whatever shape it shares with others, kept or not."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.template import Node, NodeList
from django.template.base import FilterExpression, Variable
from django.template.defaulttags import CsrfTokenNode
from django.template.loader import get_template
from django.template.smartif import TokenBase
from django.test import Client
from django.urls import reverse
from django.utils import dateformat, timezone, translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy

from approvals.human_tasks import inbox_entries
from approvals.inbox import rows as inbox_rows
from approvals.inbox.rows import InboxRow
from approvals.models import HumanTask
from approvals.states import Sla

pytestmark = pytest.mark.django_db

CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]*)"')
# What the task-row partial's context holds (see inbox_rows._draw).
CONTEXT = {"row", "due", "error", "done"}


def a_row(**overrides: Any) -> InboxRow:
    values: dict[str, Any] = {
        "task_id": "00000000-0000-0000-0000-000000000001",
        "version": 3,
        "title": "Train to Lyon",
        "kind": "approval",
        "state": "claimed",
        "state_label": "claimed",
        "is_live": True,
        "outcome": "",
        "workflow_type": "expense",
        "priority_label": "Normal",
        "due_at": datetime(2026, 3, 2, 9, 30, tzinfo=UTC),
        "sla": Sla.ON_TIME,
        "assignee": "carol",
        "owner": "",
        "substitute_for": "",
        "decides": True,
        "barred": "",
        "needs_form": False,
        "task_url": "/tasks/1/",
        "claim_url": "/tasks/1/claim/",
        "approve_url": "/tasks/1/approve/",
        "snooze_url": "/tasks/1/snooze/",
    }
    return InboxRow(**{**values, **overrides})


def draw(row: InboxRow) -> str:
    return inbox_rows.html([row])


def names_read(nodelist: NodeList) -> set[tuple[str, ...]]:
    """The lookups (["row", "title"], ...) every variable, condition, loop and filter
    argument of `nodelist` makes, the CSRF tag's included."""
    found: set[tuple[str, ...]] = set()

    def visit(thing: Any) -> None:
        if isinstance(thing, FilterExpression):
            visit(thing.var)
            for _, arguments in thing.filters:
                for _, argument in arguments:
                    visit(argument)
        elif isinstance(thing, Variable):
            if thing.lookups:
                found.add(tuple(thing.lookups))
        elif isinstance(thing, CsrfTokenNode):
            found.add(("csrf_token",))
        elif isinstance(thing, Node | TokenBase):
            for value in vars(thing).values():
                if isinstance(value, Node | NodeList | TokenBase | FilterExpression | list | tuple):
                    visit(value)
        elif isinstance(thing, NodeList | list | tuple):
            for item in thing:
                visit(item)

    visit(nodelist)
    return found


class TestTheRowTemplate:
    def test_reads_nothing_but_its_row_and_a_message(self):
        partial = get_template(inbox_rows.TEMPLATE).template

        read = names_read(partial.nodelist)

        assert {lookups[0] for lookups in read} <= CONTEXT
        # Its fields, and what InboxRow decides from them alone (its properties).
        fields = {field.name for field in dataclasses.fields(InboxRow)} | {"actions", "selectable"}
        assert {lookups[1] for lookups in read if lookups[0] == "row"} <= fields

    def test_the_walk_above_finds_what_a_row_reads(self):
        partial = get_template(inbox_rows.TEMPLATE).template

        read = names_read(partial.nodelist)

        assert {("row", "title"), ("row", "sla", "label"), ("error",)} <= read

    def test_holds_no_form_no_token_and_no_select(self):
        partial = get_template(inbox_rows.TEMPLATE).template

        html = draw(a_row(state="open"))

        assert partial.nodelist.get_nodes_by_type(CsrfTokenNode) == []
        assert "<form" not in html
        assert "<select" not in html
        assert "csrfmiddlewaretoken" not in html

    def test_each_action_is_a_button_posting_the_table_form_to_its_own_url(self):
        html = draw(a_row(state="open"))

        for url in ("/tasks/1/claim/", "/tasks/1/approve/", "/tasks/1/snooze/"):
            button = re.search(rf'<button [^>]*formaction="{url}"[^>]*>', html)
            assert button is not None, url
            assert f'hx-post="{url}"' in button.group()
            assert 'name="version" value="3"' in button.group()


class TestRowsFilledIntoTheirShape:
    @pytest.mark.parametrize(
        "change",
        [
            {"title": "Hotel in Paris"},
            {"title": 'Tom & "Jerry" <b>bold</b>'},
            {"version": 4},
            {"version": 1234567},
            {"state": "open", "state_label": "open (unclaimed)"},
            {"is_live": False, "outcome": "approved"},
            {"is_live": False, "outcome": "changes_requested"},
            {"priority_label": "Urgent"},
            {"due_at": datetime(2026, 3, 3, 9, 30, tzinfo=UTC)},
            {"due_at": None},
            {"sla": Sla.OVERDUE},
            {"assignee": "bob"},
            {"assignee": ""},
            {"owner": "alice"},
            {"substitute_for": "alice"},
            {"decides": False},
            {"decides": False, "assignee": ""},
            {"barred": "You requested this expense, so you cannot decide it."},
            {"needs_form": True},
            {"kind": "revision"},
            {"task_url": "/other/"},
        ],
    )
    def test_a_row_is_the_html_its_template_draws_for_it(self, change):
        before = draw(a_row())

        after = draw(a_row(**change))

        assert after != before
        assert after == inbox_rows.html_of_one(a_row(**change), error="", done="")

    @pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "plain"])
    def test_a_number_is_printed_as_the_template_prints_it(self, settings, grouped):
        settings.USE_THOUSAND_SEPARATOR = grouped
        row = a_row(version=1234567)

        html = draw(row)

        assert html == inbox_rows.html_of_one(row, error="", done="")
        assert ('value="1,234,567"' if grouped else 'value="1234567"') in html

    @pytest.mark.parametrize("row_cache", [True, False], ids=["kept", "not kept"])
    def test_a_row_is_the_same_html_kept_or_not(self, settings, row_cache):
        settings.BATON_INBOX_ROW_CACHE = row_cache
        inbox_rows._kept.cache_clear()
        first = draw(a_row())

        again = draw(a_row())

        assert again == first == inbox_rows.html_of_one(a_row(), error="", done="")
        assert inbox_rows._kept.cache_info().hits == (1 if row_cache else 0)

    def test_rows_of_one_shape_draw_it_once(self):
        inbox_rows._drawn_shape.cache_clear()

        html = inbox_rows.html([a_row(title=f"Hotel {n}", version=n) for n in range(3)])

        assert inbox_rows._drawn_shape.cache_info().misses == 1
        assert all(f"Hotel {n}" in html for n in range(3))

    def test_text_like_a_stand_in_is_shown_as_it_is(self):
        row = a_row(title="\x00owner\x00 and \x00due_text\x00", owner="alice")

        html = draw(row)

        assert html == inbox_rows.html_of_one(row, error="", done="")
        assert "\x00owner\x00 and \x00due_text\x00" in html

    def test_each_text_is_escaped_as_the_template_escapes_it_whatever_its_neighbours(self):
        row = a_row(
            title="Tom & Jerry's <b>",
            workflow_type='"quoted"',
            assignee="a<b",
            owner="x>y",
            substitute_for="&amp;",
            barred="It's <yours>",
        )

        html = draw(row)

        assert html == inbox_rows.html_of_one(row, error="", done="")
        assert "Tom &amp; Jerry&#x27;s &lt;b&gt;" in html
        assert "&amp;amp;" in html

    @pytest.mark.parametrize(
        "barred",
        [mark_safe("<em>Yours</em>, so you cannot decide it."), gettext_lazy("Not yours.")],
        ids=["marked safe", "lazy"],
    )
    def test_text_of_another_kind_is_printed_as_the_template_prints_it(self, barred):
        row = a_row(barred=barred)

        html = draw(row)

        assert html == inbox_rows.html_of_one(row, error="", done="")
        assert str(barred) in html

    def test_text_like_a_format_field_is_shown_as_it_is(self):
        row = a_row(title="{owner} {} {{title}} {0!r:>9}", owner="alice")

        html = draw(row)

        assert html == inbox_rows.html_of_one(row, error="", done="")
        assert "{owner} {} {{title}} {0!r:&gt;9}" in html

    @pytest.mark.parametrize("language", ["en", "de"])
    def test_the_due_time_reads_as_the_date_filter_writes_it_in_each_month(self, language):
        times = [
            datetime(2026, month, 2 + month, 2 * month - 1, 4 * month, tzinfo=UTC)
            for month in range(1, 13)
        ]

        with translation.override(language), timezone.override("Europe/Berlin"):
            shown = [inbox_rows._due(at) for at in times]
            wanted = [
                (
                    timezone.localtime(at).isoformat(),
                    dateformat.format(timezone.localtime(at), "M j, H:i"),
                )
                for at in times
            ]

        assert shown == wanted

    def test_the_due_time_follows_the_active_time_zone(self):
        with timezone.override("UTC"):
            in_utc = draw(a_row())
        with timezone.override("Asia/Tokyo"):
            in_tokyo = draw(a_row())

        assert "Mar 2, 09:30" in in_utc
        assert "Mar 2, 18:30" in in_tokyo


class TestRowsInTheInbox:
    def test_the_inbox_shows_a_task_as_it_now_stands(self, client, carol, manager_task):
        client.force_login(carol)
        client.get(reverse("approvals:inbox"))
        HumanTask.objects.filter(pk=manager_task.pk).update(title="Renamed", priority=4)
        # As a service does after it changes a task (the row reads the task's entry).
        inbox_entries.refresh(HumanTask.objects.get(pk=manager_task.pk))

        response = client.get(reverse("approvals:inbox"))

        assert "Renamed" in response.text
        assert "Urgent" in response.text
        assert manager_task.title not in response.text

    def test_each_reviewer_acts_with_their_own_pages_token(self, bob, carol, groups, make_task):
        # An open task in finance's queue: bob and carol are shown the same row.
        task = make_task(groups=[groups["finance"]])
        browsers, tokens = {}, {}
        for person in (bob, carol):
            browser = Client(enforce_csrf_checks=True)
            browser.force_login(person)
            page = browser.get(reverse("approvals:inbox"), {"tab": "queue"}).text
            assert f'<tr id="row-{task.pk}">' in page
            browsers[person.username] = browser
            tokens[person.username] = set(CSRF_INPUT.findall(task_list(page)))

        refused = browsers["carol"].post(
            reverse("approvals:snooze", args=[task.pk]),
            {"csrfmiddlewaretoken": tokens["bob"].pop(), "until": "1 hour"},
        )
        accepted = browsers["carol"].post(
            reverse("approvals:snooze", args=[task.pk]),
            {"csrfmiddlewaretoken": tokens["carol"].pop(), "until": "1 hour"},
        )

        assert refused.status_code == 403
        assert accepted.status_code == 302


def task_list(page: str) -> str:
    found = re.search(r'<section id="task-list".*?</section>', page, re.DOTALL)
    assert found is not None
    return found.group()
