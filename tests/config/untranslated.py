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

# Errors whose message no person reads in a page, an email or the API's problems: the
# programmer's and the command line's (operators run commands in English), and those
# of activities, which the engine stores with the step that raised them. Every other
# error raised with a sentence is shown as it is, so its sentence must be translated.
DEVELOPER_ERRORS = frozenset(
    {
        "AssertionError",
        "AttributeError",
        "AuditChainBroken",
        "CheckpointFileError",
        "CommandError",
        "DeliveryFailed",
        "EndpointDisabled",
        "ExportFileError",
        "ErasureRefused",
        "ExportInvalid",
        "Http404",
        "ImportError",
        "ImproperlyConfigured",
        "InvalidOrder",
        "KeyError",
        "LookupError",
        "NoManager",
        "NotCompilable",
        "NotImplementedError",
        "ProtectedError",
        "PydanticCustomError",
        "RefusedAddress",
        "RuntimeError",
        "SuspiciousOperation",
        "SystemExit",
        "TypeError",
        "UnlockRefused",
        "UnusableClaims",
        "ValueError",
    }
)
# The OpenAPI document's words, for the developers who call the API (in English): a
# schema field's or an operation's description and summary.
_API_DOCUMENTATION = frozenset(
    {"Field", "description", "summary", "tags", "title", "version", "about"}
)
# Modules of pages and of the API.
PAGE_MODULES = frozenset({"views.py", "api.py", "notifications.py", "preferences.py"})
# Calls whose string arguments a person reads: the messages framework
# (`messages.success(request, ...)`), and config.api's `problem(status, title, detail)`.
_MESSAGES = frozenset({"success", "error", "info", "warning", "add_message"})
# Keyword arguments that name things on forms, models and the admin (a `description`
# only on the admin's actions and columns: elsewhere it documents the API for developers).
_READ_KEYWORDS = frozenset(
    {"label", "help_text", "verbose_name", "verbose_name_plural", "empty_label"}
)
_ADMIN_DECORATORS = frozenset({"action", "display"})
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


def _is_message(node: ast.Call) -> bool:
    """Return whether a call is `messages.<level>(...)` of django.contrib.messages."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _MESSAGES
        and isinstance(func.value, ast.Name)
        and func.value.id == "messages"
    )


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


# Where a sentence returned or put in a variable is not read in a page, an email or the
# API, and why. Modules: the audit chain's verification and the auditors' offline
# check speak to operators and auditors in English, like the commands that run them;
# system checks speak to developers; settings hold no sentences. Functions: an
# object's name (`__str__`, kept as the audit log's object_repr, so the same in every
# language), the OpenAPI document's words for developers (`document_*`, `_kind`), and
# the command line's unlock (operators run commands in English).
NOT_READ_MODULES = frozenset(
    {"approvals/audit/chain.py", "approvals/audit/verify_export.py", "approvals/checks.py"}
    | {"config/settings.py"}
)
NOT_READ_FUNCTIONS = frozenset({"__str__", "__repr__", "_kind", "unlock"})
_NOT_READ_PREFIXES = ("document_",)
# An HTTP header's value (`response["Cache-Control"] = "private, no-store"`).
_HEADER = re.compile(r"^[A-Za-z]+(-[A-Za-z]+)+$")


def _alternatives(node: ast.expr) -> list[ast.expr]:
    """The values an expression may be: both sides of `a if c else b` and `a or b`."""
    if isinstance(node, ast.IfExp):
        return _alternatives(node.body) + _alternatives(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [value for part in node.values for value in _alternatives(part)]
    if isinstance(node, ast.Dict):
        # A table of messages by kind: each value is one of them.
        return [found for value in node.values for found in _alternatives(value)]
    return [node]


# What a string put in a variable may be without being a sentence: SQL, a media type,
# a format with named placeholders.
_CODE = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|LOCK|SET)\b"
    r"|^[a-z]+/[a-z0-9.+-]+(;|$)|%\("
)


def _is_header(target: ast.expr) -> bool:
    return (
        isinstance(target, ast.Subscript)
        and isinstance(target.slice, ast.Constant)
        and isinstance(target.slice.value, str)
        and bool(_HEADER.fullmatch(target.slice.value))
    )


def _is_code(node: ast.expr) -> bool:
    text = _unmarked_words(node)
    return text is not None and bool(_CODE.search(text))


class _PythonReader(ast.NodeVisitor):
    def __init__(self, *, is_page: bool, is_selectors: bool, reads_results: bool = True) -> None:
        self.found: list[tuple[int, str]] = []
        # Whether the sentences its functions return or assign are read by people.
        self.reads_results = reads_results
        # A list's filters, which say why a value of the query was left out.
        self.is_selectors = is_selectors
        # A page's or an API's module: every sentence it passes on is one a person reads.
        self.is_page = is_page

    def _check(self, node: ast.expr) -> None:
        text = _unmarked_words(node)
        if text is not None:
            self.found.append((node.lineno, text))

    def visit_Raise(self, node: ast.Raise) -> None:
        error = node.exc
        if isinstance(error, ast.Call) and _name(error.func) not in DEVELOPER_ERRORS:
            for argument in error.args:
                self._check_sentence(argument)
            for keyword in error.keywords:
                self._check_sentence(keyword.value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node.func)
        if name in _GETTEXT:
            return
        if name in {"problem", "ApiProblem"} or _is_message(node) or self._is_problem(node):
            # Whatever these say is read, down to a single word ("Approved.").
            for argument in node.args:
                self._check(argument)
        elif self.is_page and name not in _API_DOCUMENTATION:
            for argument in node.args:
                self._check_sentence(argument)
            for keyword in node.keywords:
                if keyword.arg not in _API_DOCUMENTATION:
                    self._check_sentence(keyword.value)
        elif name in {"Field", "Workflow"} and not self.is_page:
            # A workflow type's input or form field: its title labels a box of the start
            # or task form, its description helps fill it in (the API's own schemas, in
            # the page modules, document the API for developers in English); a type's
            # title and description head its start form.
            for keyword in node.keywords:
                if keyword.arg in {"title", "description"}:
                    self._check(keyword.value)
        for keyword in node.keywords:
            if keyword.arg in _READ_KEYWORDS or (
                name in _ADMIN_DECORATORS and keyword.arg == "description"
            ):
                self._check(keyword.value)
        self.generic_visit(node)

    def _is_problem(self, node: ast.Call) -> bool:
        """`problems.append(...)` in a list's selectors: why a filter was left out."""
        func = node.func
        return (
            self.is_selectors
            and isinstance(func, ast.Attribute)
            and func.attr == "append"
            and _name(func.value) == "problems"
        )

    def _check_sentence(self, node: ast.expr) -> None:
        """Report a string of words (a space between two of them): not a name, a code, a
        template's path or a URL's name."""
        text = _unmarked_words(node)
        if text is not None and re.search(r"[^\W\d_]\S*\s+\S*[^\W\d_]", text.strip()):
            self.found.append((node.lineno, text))

    def _reads_results(self) -> bool:
        """Whether what is returned or assigned here is read by people (see NOT_READ_*)."""
        return self.reads_results and not (
            self._function in NOT_READ_FUNCTIONS or self._function.startswith(_NOT_READ_PREFIXES)
        )

    _function = ""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer = self._function
        self._function = node.name
        self.generic_visit(node)
        self._function = outer

    def visit_Return(self, node: ast.Return) -> None:
        # A sentence a function hands back (a title, a reason, a label) is read as it is.
        if node.value is not None and self._reads_results():
            for value in _alternatives(node.value):
                self._check_sentence(value)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        # Meta's verbose names and a choices class's labels: NAME = "value", "Label".
        for target in node.targets:
            if _name(target) in _READ_KEYWORDS:
                self._check(node.value)
        # A sentence put in a variable is one on its way to a page (SQL is not a sentence,
        # nor is an HTTP header's value).
        headers = [target for target in node.targets if _is_header(target)]
        if self._reads_results() and not headers:
            for value in _alternatives(node.value):
                if not _is_code(value):
                    self._check_sentence(value)
        if isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2 and self._in_choices:
            self._check(node.value.elts[1])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        # `context: dict[str, Any] = {...}`: the same as an assignment without a type.
        if node.value is not None and self._reads_results() and not _is_header(node.target):
            for value in _alternatives(node.value):
                if not _is_code(value):
                    self._check_sentence(value)
        self.generic_visit(node)

    _in_choices = False

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        outer = self._in_choices
        self._in_choices = any(_name(base) in _CHOICES for base in node.bases)
        self.generic_visit(node)
        self._in_choices = outer


def python_findings(path: Path, root: Path) -> list[Finding]:
    """Return the strings of one module that a person reads and no gettext call wraps."""
    reader = _PythonReader(
        is_page=path.name in PAGE_MODULES or path.name.endswith("_api.py"),
        is_selectors=path.name.endswith("selectors.py"),
        reads_results=str(path.relative_to(root)) not in NOT_READ_MODULES,
    )
    reader.visit(ast.parse(path.read_text(), filename=str(path)))
    name = str(path.relative_to(root))
    return [Finding(name, line, text) for line, text in sorted(set(reader.found))]
