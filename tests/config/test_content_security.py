"""What a page tells the browser it may do, and templates that need nothing more.

The Content-Security-Policy allows scripts and styles from this site's files only,
so the templates must hold no inline script, style or event handler: the second
class reads them all, since a browser shows a refused one only in its console.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
# Emails carry inline styles (mail readers need them); no browser page includes them.
PAGE_TEMPLATES = sorted(
    path for path in (ROOT / "templates").rglob("*.html") if "emails" not in path.parts
)


def directives(header: str) -> dict[str, str]:
    return {
        name: value.strip()
        for name, _, value in (part.strip().partition(" ") for part in header.split(";"))
    }


@pytest.mark.django_db
class TestHeaders:
    @pytest.fixture
    def inbox(self, client, carol, manager_task):
        client.force_login(carol)
        return client.get(reverse("approvals:inbox"))

    def test_the_policy_allows_this_site_only_and_nothing_inline(self, inbox):
        policy = directives(inbox["Content-Security-Policy"])

        assert policy == {
            "default-src": "'self'",
            "object-src": "'none'",
            "base-uri": "'none'",
            "form-action": "'self'",
            "frame-ancestors": "'none'",
        }

    def test_unused_browser_features_are_denied(self, inbox):
        features = dict(item.split("=") for item in inbox["Permissions-Policy"].split(", "))

        for feature in ("camera", "microphone", "geolocation", "payment", "usb"):
            assert features[feature] == "()"

    def test_no_sniffing_no_framing_and_no_referrer_to_other_sites(self, inbox):
        assert inbox["X-Content-Type-Options"] == "nosniff"
        assert inbox["X-Frame-Options"] == "DENY"
        assert inbox["Referrer-Policy"] == "same-origin"
        assert inbox["Cross-Origin-Opener-Policy"] == "same-origin"

    def test_the_sign_in_page_and_the_admin_get_the_same_policy(self, client, inbox):
        for url in (reverse("login"), reverse("admin:login")):
            response = client.get(url)

            assert response["Content-Security-Policy"] == inbox["Content-Security-Policy"]

    def test_htmx_is_told_to_add_no_inline_style_and_to_evaluate_nothing(self, inbox):
        assert '"includeIndicatorStyles":false' in inbox.text
        assert '"allowEval":false' in inbox.text


class TestTemplates:
    @pytest.mark.parametrize("path", PAGE_TEMPLATES, ids=lambda path: path.name)
    def test_hold_no_inline_script_style_or_handler(self, path):
        text = path.read_text()

        inline_scripts = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", text)
        style_attributes = re.findall(r"\sstyle\s*=", text)
        style_elements = re.findall(r"<style\b", text)
        handlers = re.findall(r"\s(?:on[a-z]+|hx-on[:-][\w:-]*)\s*=", text)
        evaluated = re.findall(r"javascript:|js:|hx-trigger=\"[^\"]*\[", text)

        assert inline_scripts == []
        assert style_attributes == []
        assert style_elements == []
        assert handlers == []
        assert evaluated == []

    def test_every_page_template_was_read(self):
        names = {path.name for path in PAGE_TEMPLATES}

        assert {"base.html", "inbox.html", "human_task.html", "login.html"} <= names
