"""alice reads Baton in German, in a real headless Chromium (Debian's) driven by Playwright:
she chooses German and Berlin's time, sends an expense, carol (in English) approves it,
and alice reads the outcome in German with the time in her zone and her language's format."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

import pytest
from django.utils import dateformat, translation
from playwright.sync_api import expect

from approvals.models import Preferences
from tests.e2e import test_inbox_browser as inbox
from workflows.models import WorkflowRun

# The inbox's browser tests' Chromium and sign-in, shared: every page is watched, and
# any Content-Security-Policy violation or console error fails the test.
browser = inbox.browser
watched = inbox.watched
sign_in = inbox.sign_in
shoot = inbox.shoot

pytestmark = pytest.mark.e2e


class TestAliceInGerman:
    def test_alice_chooses_german_sends_an_expense_and_reads_carols_decision_in_german(
        self, sign_in, employees, drive
    ):
        alice = sign_in("alice")
        alice.get_by_role("navigation", name="Main").get_by_role(
            "link", name="Language and time zone"
        ).click()
        alice.get_by_label("Language").select_option("de")
        alice.get_by_label("Time zone").select_option("Europe/Berlin")
        alice.get_by_role("button", name="Save").click()

        expect(alice.locator("html")).to_have_attribute("lang", "de")
        expect(alice.get_by_role("heading", name="Sprache und Zeitzone")).to_be_visible()
        saved = "Ihre Sprache und Zeitzone sind gespeichert."
        expect(alice.get_by_role("status")).to_have_text(saved)
        assert Preferences.objects.filter(
            user__username="alice", language="de", time_zone="Europe/Berlin"
        ).exists()
        shoot(alice, "german-preferences")

        nav = alice.get_by_role("navigation", name="Hauptmenü")
        nav.get_by_role("link", name="Neuer Antrag").click()
        expect(alice.get_by_role("heading", name="Neuer Antrag")).to_be_visible()
        alice.get_by_role("link", name="Ausgabe").click()
        expect(alice.get_by_role("heading", name="Neuer Antrag: Ausgabe")).to_be_visible()
        # The type's own labels, help and errors are German too.
        expect(alice.get_by_text("Wofür die Ausgabe war")).to_be_visible()
        alice.get_by_label("Titel").fill("Zug nach Lyon")
        alice.get_by_label("Betrag").fill("120.001")
        alice.get_by_label("Währung").fill("EUR")
        alice.get_by_role("button", name="Antrag senden").click()

        expect(alice.get_by_role("alert")).to_contain_text(
            "Ihr Antrag wurde nicht gesendet: korrigieren Sie die unten markierten Felder."
        )
        expect(alice.locator("form.start-form")).to_contain_text(
            "Geben Sie einen Betrag mit höchstens zwei Nachkommastellen, z. B. 42.50 ein."
        )
        shoot(alice, "german-start-form-error")
        alice.get_by_label("Betrag").fill("120.00")
        alice.get_by_role("button", name="Antrag senden").click()
        expect(alice.get_by_role("status")).to_have_text("Ihr Antrag wurde gesendet.")
        run = drive(WorkflowRun.objects.get())

        nav.get_by_role("link", name="Meine Anträge").click()
        row = alice.locator("tr", has_text="Zug nach Lyon")
        expect(row.get_by_role("cell").nth(1)).to_have_text("wartend")
        # Where it stands, under the step's German label.
        expect(row).to_contain_text(
            "Genehmigung durch die Führungskraft: wartet auf eine Entscheidung durch Carol"
        )
        shoot(alice, "german-my-requests")

        carol = sign_in("carol")  # no choice made: her browser asks for English
        carol.get_by_role("link", name=re.compile("Zug nach Lyon")).click()
        carol.get_by_role("button", name="Approve", exact=True).click()
        expect(carol.locator("#decision-panel").get_by_role("status")).to_have_text("Approved.")

        alice.goto(f"/requests/{run.pk}/")
        task = run.human_tasks.get(node="manager_approval")
        with translation.override("de"):
            when = dateformat.format(
                task.decided_at.astimezone(ZoneInfo("Europe/Berlin")), "d.m.Y H:i T"
            )
        assert re.fullmatch(r"\d\d\.\d\d\.\d{4} \d\d:\d\d CES?T", when)
        decision = alice.locator("article.decision-entry", has_text="Genehmigt von Carol")
        expect(decision).to_contain_text(f"Genehmigt von Carol am {when} über Posteingang")
        expect(alice.get_by_role("heading", name="Entscheidungen")).to_be_visible()
        # Money as German writes it, under the type's German labels.
        amount = alice.locator("dt", has_text="Betrag").locator("xpath=following-sibling::dd[1]")
        expect(amount).to_have_text("120,00 €")
        # The timeline and the picture name the steps in German too.
        expect(alice.locator("ol.timeline")).to_contain_text("Einreichen abgeschlossen")
        picture = alice.get_by_role("img", name=re.compile("^Workflow-Diagramm"))
        expect(picture).to_contain_text("Genehmigung durch die Führungskraft")
        shoot(alice, "german-request")

        alice.get_by_role("navigation", name="Hauptmenü").get_by_role(
            "link", name=re.compile("Benachrichtigungen")
        ).click()
        told = alice.get_by_role(
            "link", name=re.compile("^Carol hat „Expense: Zug nach Lyon .*“ genehmigt$")
        )
        expect(told).to_be_visible()
        shoot(alice, "german-decided")
