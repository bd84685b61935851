"""Find words a person would read that are not marked for translation.

Two readers, used by tests/config/test_translations.py:

- `template_findings` reads a template as a browser would: it drops comments, the
  text inside {% translate %} and {% blocktranslate %}, and every other tag and
  variable, then parses what is left as HTML. Any text, and any attribute a person
  reads (title, alt, placeholder, aria-label, a button's value), that still holds a
  letter is reported: "Approve" is, "{{ count }} ·" is not.
- `python_findings` reads a module's syntax tree for the strings Baton shows people:
  messages to the messages framework, the titles and details of the API's problems,
  the messages of the errors pages and the API show (`USER_FACING_ERRORS`), form
  labels and help texts, and model and choice names. Each must be a call of
  gettext (`_`, `gettext`, `gettext_lazy`, `ngettext`, `pgettext`...).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

# Words that are the same in every language: the product's name, and the symbols for
# a version ("v2") and for hours ("3 h").
NAMES = frozenset({"Baton", "v", "h"})
# Attributes whose values a person reads or hears.
READ_ATTRIBUTES = frozenset(
    {"title", "alt", "placeholder", "aria-label", "aria-description", "data-label"}
)
# Elements whose text is code or machine text, the same in every language.
_NOT_READ = frozenset({"script", "style", "code", "pre", "kbd", "samp"})
_LETTER = re.compile(r"[^\W\d_]")

_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_BLOCK_COMMENT = re.compile(r"\{%\s*comment\b.*?%\}.*?\{%\s*endcomment\s*%\}", re.S)
_BLOCK_TRANSLATE = re.compile(
    r"\{%\s*blocktrans(?:late)?\b.*?%\}.*?\{%\s*endblocktrans(?:late)?\s*%\}", re.S
)
_TAG = re.compile(r"\{%.*?%\}|\{\{.*?\}\}", re.S)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text!r}"


def _blank(match: re.Match[str]) -> str:
    """Replace a region by spaces, keeping its newlines so that line numbers hold."""
    return re.sub(r"[^\n]", " ", match.group())


def _shows_words(text: str) -> bool:
    words = [word for word in re.split(r"\s+", text) if _LETTER.search(word)]
    return any(word.strip(".,:;!?()·") not in NAMES for word in words)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str]] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _NOT_READ:
            self._skipping += 1
        values = dict(attrs)
        read = set(READ_ATTRIBUTES)
        if tag == "input" and values.get("type") in {"submit", "button", "reset"}:
            read.add("value")
        for name, value in attrs:
            if name in read and value and _shows_words(value):
                self.found.append((self.getpos()[0], f"{name}={value.strip()}"))

    def handle_endtag(self, tag: str) -> None:
        if tag in _NOT_READ and self._skipping:
            self._skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self._skipping and _shows_words(data):
            self.found.append((self.getpos()[0], " ".join(data.split())))


def template_findings(path: Path, root: Path) -> list[Finding]:
    """Return the text of one template that a person reads and no translate tag covers."""
    source = path.read_text()
    for pattern in (_COMMENT, _BLOCK_COMMENT, _BLOCK_TRANSLATE, _TAG):
        source = pattern.sub(_blank, source)
    reader = _Reader()
    reader.feed(source)
    reader.close()
    name = str(path.relative_to(root))
    return [Finding(name, line, text) for line, text in reader.found]


# ---------------------------------------------------------------------------
# Python
# ---------------------------------------------------------------------------

# The errors whose message a page or the API shows a person as it is.
USER_FACING_ERRORS = frozenset(
    {
        "ApiProblem",
        "TaskError",
        "TaskNotFound",
        "NotAllowed",
        "ConflictOfDuty",
        "InvalidRequest",
        "InvalidForm",
        "TaskConflict",
        "AlreadyDecided",
        "TaskClosed",
        "StaleTask",
        "RequestNotFound",
        "PreferenceRefused",
        "LinkProblem",
        "ValidationError",
        "HttpError",
        "NotOperator",
        "InvalidEndpoint",
        "EndpointDisabled",
        "InvalidInput",
        "StartRefused",
        "CannotStart",
        "BadFilter",
        "BadCursor",
        "UnlockRefused",
    }
)
# Calls whose string arguments a person reads: the messages framework, problems.
_MESSAGE_CALLS = frozenset({"success", "error", "info", "warning", "add_message", "problem"})
# Keyword arguments that name things on forms, models and the admin.
_READ_KEYWORDS = frozenset(
    {"label", "help_text", "verbose_name", "verbose_name_plural", "empty_label", "description"}
)
_GETTEXT = frozenset(
    {
        "_",
        "gettext",
        "gettext_lazy",
        "ngettext",
        "ngettext_lazy",
        "pgettext",
        "pgettext_lazy",
        "npgettext",
        "npgettext_lazy",
        "format_lazy",
    }
)


_CHOICES = frozenset({"TextChoices", "IntegerChoices"})


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _unmarked_words(node: ast.expr) -> str | None:
    """Return the text of a string a person would read that no gettext call wraps."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if _shows_words(node.value) else None
    if isinstance(node, ast.JoinedStr):
        text = "".join(
            part.value
            for part in node.values
            if isinstance(part, ast.Constant) and isinstance(part.value, str)
        )
        return text if _shows_words(text) else None
    if isinstance(node, ast.BinOp):
        return _unmarked_words(node.left) or _unmarked_words(node.right)
    return None


class _PythonReader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def _check(self, node: ast.expr) -> None:
        text = _unmarked_words(node)
        if text is not None:
            self.found.append((node.lineno, text))

    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node.func)
        if name in _GETTEXT:
            return
        if name in USER_FACING_ERRORS or name in _MESSAGE_CALLS:
            for argument in node.args:
                self._check(argument)
        for keyword in node.keywords:
            if keyword.arg in _READ_KEYWORDS or (
                name in USER_FACING_ERRORS and keyword.arg in {"title", "detail"}
            ):
                self._check(keyword.value)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        # Meta's verbose names and a choices class's labels: NAME = "value", "Label".
        for target in node.targets:
            if _name(target) in _READ_KEYWORDS:
                self._check(node.value)
        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2 and self._in_choices:
            self._check(node.value.elts[1])
        self.generic_visit(node)

    _in_choices = False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self._in_choices
        self._in_choices = any(_name(base) in _CHOICES for base in node.bases)
        self.generic_visit(node)
        self._in_choices = outer


def python_findings(path: Path, root: Path) -> list[Finding]:
    """Return the strings of one module that a person reads and no gettext call wraps."""
    reader = _PythonReader()
    reader.visit(ast.parse(path.read_text(), filename=str(path)))
    name = str(path.relative_to(root))
    return [Finding(name, line, text) for line, text in reader.found]
