"""The audit export's file: its records, how CSV and NDJSON write them, and the seal that
binds them in order.

A file holds three kinds of record, each on its own line (a CSV row or a JSON line):

- one `export` record first: when, with which filters, up to which entry, and the
  newest signed checkpoint covering that entry, with the entry it names (`anchor`);
- one `entry` record per exported audit entry: what its chain hash covers (see
  `approvals.audit.hashing.entry_content`), its `previous` and `hash` chain values,
  and labels for people (the object's type and name, the actor's username, the
  workflow type) that the chain hash does not cover;
- one `end` record last: how many entries came before it.

Every record carries a `seal`: an HMAC-SHA256, under the audit key, of the seal
before it and of the record exactly as written. Whoever lacks the key cannot
remove, add, move or edit a record without breaking the seal from there on.

Pure Python (csv, json, hmac), free of Django: `approvals.audit.export` writes
files with it and `approvals.audit.verify_export` reads them back, anywhere.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from approvals.audit.hashing import chained_comment, entry_content

VERSION = 1
FORMATS = ("csv", "ndjson")

# An entry record's fields, in the order CSV writes them.
ENTRY_FIELDS = (
    "id",
    "timestamp",
    "workflow_type",
    "object_type",
    "content_type",
    "object_pk",
    "object_repr",
    "event",
    "actor",
    "actor_username",
    "channel",
    "comment",
    "comment_digest",
    "remote_addr",
    "changes",
    "previous",
    "hash",
)
CSV_COLUMNS = ("record", *ENTRY_FIELDS, "details", "seal")
_INTEGERS = {"id", "content_type"}
_NULLABLE = {"actor", "workflow_type", "actor_username", "remote_addr", "comment_digest"}
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection):
# such a cell is written with a leading apostrophe, as is a cell that starts with one.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


class ExportFileError(ValueError):
    """A record cannot be read; the message says where and why."""


def entry_content_of(record: dict[str, Any], *, key: bytes) -> dict[str, Any]:
    """Return what an entry record's chain hash covers, from its fields (a record exported
    before comments were digested has no `comment_digest`)."""
    return entry_content(
        content_type=record["content_type"],
        object_pk=record["object_pk"],
        event=record["event"],
        actor=record["actor"],
        channel=record["channel"],
        comment=chained_comment(record["comment"], record.get("comment_digest"), key=key),
        remote_addr=record["remote_addr"],
        changes=record["changes"],
        timestamp=record["timestamp"],
    )


def seal(previous_seal: str, written: bytes, *, key: bytes) -> str:
    """Return a record's seal: HMAC-SHA256 under `key` of the seal before it ("" for the
    first record) and of the record as written, seal left out."""
    message = b"baton.audit-export\n" + previous_seal.encode() + b"\n" + written
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _compact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


class ExportWriter:
    """Write an export's records as text in one format, sealing each after the one before."""

    def __init__(self, *, format: str, key: bytes) -> None:
        if format not in FORMATS:
            raise ValueError(f"Unknown format {format!r}: use one of {', '.join(FORMATS)}.")
        self.format = format
        self._key = key
        self._seal = ""
        self.entries = 0

    def start(self, header: dict[str, Any]) -> str:
        """Return the file's first text: CSV's column names and the `export` record."""
        opening = _csv_line(list(CSV_COLUMNS)) if self.format == "csv" else ""
        return opening + self._write("export", header)

    def entry(self, fields: dict[str, Any]) -> str:
        """Return one entry record (`fields` holds every name in ENTRY_FIELDS)."""
        self.entries += 1
        return self._write("entry", fields)

    def end(self) -> str:
        """Return the `end` record, which says how many entries came before it."""
        return self._write("end", {"entries": self.entries})

    def _write(self, kind: str, fields: dict[str, Any]) -> str:
        if self.format == "ndjson":
            record = {"record": kind, **fields}
            self._seal = seal(self._seal, _compact(record), key=self._key)
            line = json.dumps({**record, "seal": self._seal}, sort_keys=True, ensure_ascii=False)
            return line + "\n"
        cells = _csv_cells(kind, fields)
        self._seal = seal(self._seal, _compact(cells), key=self._key)
        return _csv_line([*cells, self._seal])


def _csv_cells(kind: str, fields: dict[str, Any]) -> list[str]:
    if kind != "entry":
        return [kind, *([""] * len(ENTRY_FIELDS)), _escape(json.dumps(fields, sort_keys=True))]
    cells = [kind]
    for name in ENTRY_FIELDS:
        value = fields[name]
        if name == "changes":
            value = json.dumps(value, sort_keys=True)
        cells.append("" if value is None else _escape(str(value)))
    return [*cells, ""]


def _escape(cell: str) -> str:
    return "'" + cell if cell.startswith(_FORMULA_STARTS) else cell


def _unescape(cell: str) -> str:
    return cell[1:] if cell.startswith("'") else cell


def _csv_line(cells: list[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(cells)
    return buffer.getvalue()


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One record read back: its kind, its fields (typed as written), where it began, its
    seal, and the bytes that seal covers."""

    kind: str
    fields: dict[str, Any]
    line: int
    seal: str
    sealed: bytes

    def follows(self, previous_seal: str, *, key: bytes) -> bool:
        """Say whether this record's seal is the one `key` gives after `previous_seal`."""
        return hmac.compare_digest(self.seal, seal(previous_seal, self.sealed, key=key))


def read_records(lines: Iterable[str]) -> Iterator[Record]:
    """Read the records of an export's text, in order; raise ExportFileError on one that
    cannot be read. The format is told by the first line (CSV's column names, or JSON)."""
    lines = iter(lines)
    first = next(lines, "")
    if first.lstrip().startswith("{"):
        yield from _ndjson_records(_chain_first(first, lines))
    elif first:
        yield from _csv_records(_chain_first(first, lines))


def _chain_first(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


def _ndjson_records(lines: Iterable[str]) -> Iterator[Record]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            raise ExportFileError(f"Line {number} is not JSON: it was altered or cut.") from None
        if not isinstance(data, dict) or not isinstance(data.get("seal"), str):
            raise ExportFileError(f"Line {number} is not an export record: it has no seal.")
        sealed_seal = data.pop("seal")
        kind = data.get("record")
        yield Record(str(kind), data, number, sealed_seal, _compact(data))


def _csv_records(lines: Iterable[str]) -> Iterator[Record]:
    reader = csv.reader(lines)
    try:
        header = next(reader)
    except csv.Error as error:
        raise ExportFileError(f"Line 1 is not CSV: {error}.") from None
    if tuple(header) != CSV_COLUMNS:
        raise ExportFileError(
            "Line 1 is neither JSON nor the export's CSV column names "
            f"({','.join(CSV_COLUMNS)}): this is not an audit export."
        )
    while True:
        line = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise ExportFileError(f"Line {line} is not CSV: {error}.") from None
        if not cells:
            continue
        if len(cells) != len(CSV_COLUMNS):
            raise ExportFileError(
                f"Line {line} has {len(cells)} columns, not {len(CSV_COLUMNS)}: "
                "it was altered or cut."
            )
        *written, sealed_seal = cells
        kind = written[0]
        try:
            fields = _csv_fields(kind, written)
        except ValueError as error:
            raise ExportFileError(f"Line {line}: {error}") from None
        yield Record(kind, fields, line, sealed_seal, _compact(written))


def _csv_fields(kind: str, cells: list[str]) -> dict[str, Any]:
    if kind != "entry":
        details = json.loads(_unescape(cells[-1]) or "null")
        if not isinstance(details, dict):
            raise ValueError(f"the {kind} record's details are not a JSON object.")
        return {"record": kind, **details}
    fields: dict[str, Any] = {"record": kind}
    for name, cell in zip(ENTRY_FIELDS, cells[1:-1], strict=True):
        text = _unescape(cell)
        if name in _NULLABLE and text == "":
            fields[name] = None
        elif name in _INTEGERS or name == "actor":
            fields[name] = int(text)
        elif name == "changes":
            fields[name] = json.loads(text)
        else:
            fields[name] = text
    return fields
