"""Every word a person reads is marked for translation, and the German catalogue says
each one, compiled as committed.

The readers are in tests/config/untranslated.py. The catalogue test runs Django's
makemessages (GNU gettext's xgettext and msgmerge: `make gettext` installs them) over a
copy of the sources, so the committed locale/ is never touched, and compares what it
finds with what is committed.
"""

from __future__ import annotations

import gettext
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.untranslated import python_findings, template_findings

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(path for path in (ROOT / "templates").rglob("*") if path.is_file())
# The modules whose words reach people: the approvals app (but its commands, which
# operators run in English), the site's configuration, and what of workflows pages and
# the API show: the run API, starting, cleaning, states, the models, the admin,
# pydantic's errors, and the shipped `order` type's fields.
PYTHON = sorted(
    [
        path
        for folder in ("approvals", "config")
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts and "management" not in path.parts
    ]
    + [
        ROOT / "workflows" / name
        for name in (
            "api.py",
            "starting.py",
            "cleaning.py",
            "states.py",
            "models.py",
            "admin.py",
            "field_errors.py",
            "examples/fields.py",
            "examples/order.py",
        )
    ]
)
CATALOGUE = ROOT / "locale" / "de" / "LC_MESSAGES" / "django.po"
COMPILED = CATALOGUE.with_suffix(".mo")
# What makemessages reads: the sources, never the tests, the benchmarks or the venv.
SOURCES = ("approvals", "config", "workflows", "templates", "manage.py")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


class TestTemplates:
    @pytest.mark.parametrize("path", TEMPLATES, ids=_name)
    def test_every_word_a_person_reads_is_in_a_translate_tag(self, path):
        findings = template_findings(path, ROOT)

        assert not findings, "text outside {% translate %}:\n" + "\n".join(map(str, findings))

    def test_a_new_unmarked_approve_button_is_found(self, tmp_path):
        template = tmp_path / "page.html"
        template.write_text(
            '{% load i18n %}<form><button type="submit" class="primary">Approve</button>'
            '<button aria-label="{% translate "Reject" %}">{% translate "Reject" %}</button>'
            "</form>"
        )

        findings = template_findings(template, tmp_path)

        assert [(finding.line, finding.text) for finding in findings] == [(1, "Approve")]

    def test_an_unmarked_attribute_a_screen_reader_reads_is_found(self, tmp_path):
        template = tmp_path / "row.html"
        template.write_text('<td data-label="Due"><a aria-label="Open {{ title }}">→</a></td>')

        findings = template_findings(template, tmp_path)

        assert [finding.text for finding in findings] == ["data-label=Due", "aria-label=Open"]

    def test_values_punctuation_code_and_the_product_name_need_no_tag(self, tmp_path):
        template = tmp_path / "quiet.html"
        template.write_text(
            "{% load i18n %}{% block title %}{{ task.title }} · Baton{% endblock %}\n"
            "<p>{{ count }} · {{ when|date:_('M j') }} — v{{ version }}: {{ hours }} h</p>\n"
            "<pre>{{ result }} null</pre><code>webhook-id</code>{# a comment #}\n"
            "{% blocktranslate %}Hello {{ name }},{% endblocktranslate %}"
        )

        assert template_findings(template, tmp_path) == []


class TestPython:
    @pytest.mark.parametrize("path", PYTHON, ids=_name)
    def test_every_sentence_a_person_reads_is_marked_with_gettext(self, path):
        findings = python_findings(path, ROOT)

        assert not findings, "strings without gettext:\n" + "\n".join(map(str, findings))

    def test_an_unmarked_refusal_message_and_label_are_found(self, tmp_path):
        module = tmp_path / "views.py"
        module.write_text(
            "from django.contrib import messages\n"
            "from django.utils.translation import gettext as _\n"
            "def approve(request, form):\n"
            "    messages.success(request, 'Approved.')\n"
            "    messages.error(request, _('Rejected.'))\n"
            "    raise InvalidRequest(f'There is no user {name!r}.')\n"
            "label = forms.CharField(label='Cost centre')\n"
            "logger.info('inbox.approved')\n"
            "page = render(request, 'approvals/inbox/inbox.html')\n"
        )

        findings = python_findings(module, tmp_path)

        assert [(finding.line, finding.text) for finding in findings] == [
            (4, "Approved."),
            (6, "There is no user ."),
            (7, "Cost centre"),
        ]

    def test_a_sentence_returned_assigned_or_tabled_without_gettext_is_found(self, tmp_path):
        module = tmp_path / "quorum.py"
        module.write_text(
            "def reason(count):\n"
            "    return f'This approval needs {count} approvals.'\n"
            "def title(data):\n"
            "    return _('Bank details') if data else 'Bank details of a vendor'\n"
            "error = 'This form expired. Please confirm again.'\n"
            "MESSAGES = {'used': 'This link was already used.', 'ok': _('It works.')}\n"
            "class Form(BaseModel):\n"
            "    title: str = Field(title='Title', description=_('what it was for'))\n"
        )

        findings = python_findings(module, tmp_path)

        assert [(finding.line, finding.text) for finding in findings] == [
            (2, "This approval needs  approvals."),
            (4, "Bank details of a vendor"),
            (5, "This form expired. Please confirm again."),
            (6, "This link was already used."),
            (8, "Title"),
        ]

    def test_code_headers_names_and_the_operators_words_are_not_sentences(self, tmp_path):
        module = tmp_path / "views.py"
        module.write_text(
            "query = 'SELECT id FROM approvals_humantask WHERE state = %s'\n"
            "response['Cache-Control'] = 'private, no-store'\n"
            "kind = 'text/csv; charset=utf-8'\n"
            "class Entry:\n"
            "    def __str__(self):\n"
            "        return f'#{self.pk} in {self.tab} of user {self.user_id}'\n"
            "def unlock(token):\n"
            "    what = f'API token {token}'\n"
            "name = 'approvals/inbox/inbox.html'\n"
        )

        assert python_findings(module, tmp_path) == []

    def test_a_programmers_error_is_left_in_english(self, tmp_path):
        module = tmp_path / "dsl.py"
        module.write_text(
            "raise ImproperlyConfigured('BATON_LOG_FORMAT must be json or text')\n"
            "raise CommandError('Name what to unlock.')\n"
        )

        assert python_findings(module, tmp_path) == []


def _catalogue(path: Path) -> dict[str, list[str]]:
    """Read a .po file's entries as context, msgid and plural -> msgstrs, with its flags."""
    entries: dict[str, list[str]] = {}
    for block in path.read_text().split("\n\n"):
        lines = block.strip().splitlines()
        key, strings, flags, current = "", [], [], ""
        for line in lines:
            if line.startswith("#,"):
                flags += [flag.strip() for flag in line[2:].split(",")]
            elif line.startswith("msgctxt "):
                current, key = "msgctxt", line.split(" ", 1)[1][1:-1] + "\x04"
            elif line.startswith(("msgid ", "msgid_plural ", "msgstr")):
                current = line.split(" ", 1)[0]
                value = line.split(" ", 1)[1][1:-1]
                if current.startswith("msgstr"):
                    strings.append(value)
                else:
                    key += ("\x00" if current == "msgid_plural" else "") + value
            elif line.startswith('"'):
                if current.startswith("msgstr"):
                    strings[-1] += line[1:-1]
                else:
                    key += line[1:-1]
        if key:
            entries[key] = strings + [f"#{flag}" for flag in flags if flag == "fuzzy"]
    return entries


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    """The German catalogue as makemessages makes it now from a copy of the sources,
    merged into the committed one (so the committed translations carry over)."""
    for tool in ("xgettext", "msgmerge", "msgfmt"):
        if shutil.which(tool) is None:
            pytest.fail(f"The catalogue test needs GNU gettext's {tool}: run `make gettext`.")
    copy = tmp_path_factory.mktemp("sources")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, copy / name)
    shutil.copytree(ROOT / "locale", copy / "locale")
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", *MAKEMESSAGES],
        cwd=copy,
        check=True,
        capture_output=True,
    )
    return copy / "locale" / "de" / "LC_MESSAGES" / "django.po"


# The options the catalogue is made with (README's "A second language" says the same).
MAKEMESSAGES = ("--locale=de", "--no-obsolete", "--no-location", "--ignore=locale")


class TestCatalogue:
    def test_the_committed_catalogue_holds_exactly_the_strings_the_sources_mark(self, regenerated):
        committed, fresh = _catalogue(CATALOGUE), _catalogue(regenerated)

        assert sorted(set(fresh) - set(committed)) == [], "marked but not in locale/de"
        assert sorted(set(committed) - set(fresh)) == [], "in locale/de but marked nowhere"

    def test_every_string_has_a_german_translation_that_is_not_fuzzy(self, regenerated):
        entries = _catalogue(regenerated)

        untranslated = [key for key, strings in entries.items() if key and not all(strings)]
        fuzzy = [key for key, strings in entries.items() if "#fuzzy" in strings]
        assert len(entries) > 800
        assert untranslated == []
        assert fuzzy == []

    def test_the_translations_keep_every_placeholder_of_the_english(self):
        checked = subprocess.run(
            ["msgfmt", "--check", "--output-file=/dev/null", str(CATALOGUE)],
            capture_output=True,
            text=True,
        )

        assert checked.returncode == 0, checked.stderr

    def test_the_committed_mo_is_the_po_compiled(self, tmp_path):
        compiled = tmp_path / "django.mo"
        subprocess.run(["msgfmt", f"--output-file={compiled}", str(CATALOGUE)], check=True)

        with COMPILED.open("rb") as committed, compiled.open("rb") as fresh:
            assert (
                gettext.GNUTranslations(committed)._catalog  # type: ignore[attr-defined]
                == gettext.GNUTranslations(fresh)._catalog  # type: ignore[attr-defined]
            ), "locale/de/LC_MESSAGES/django.mo is stale: run `make messages`"
