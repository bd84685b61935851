"""Verify an audit export offline: `python -m approvals.audit.verify_export FILE KEYFILE`.

For an auditor, anywhere: Python 3.11 and this package, no Django, no database.
KEYFILE holds the audit key (BATON_AUDIT_KEY's value; one final newline is ignored).
Exit 0 with a summary of what holds, 1 naming the first record that does not, 2 when
a file cannot be read.

What a passing check proves, record by record (README, "The audit log", says it for
people):

- the `export` record's checkpoint is signed with the key, and the entry it names
  (the `anchor`) has the chain hash the checkpoint states;
- every entry's chain hash is the HMAC, under the key, of its previous hash and of
  its fields, so none of those fields was changed since the entry was written;
- an entry whose `previous` is the hash of the entry before it in the file followed
  it in the chain; elsewhere the filters left entries out (a gap). An export without
  filters must have no gap, start at the chain's first entry and end at the
  checkpoint's, with the checkpoint's count;
- every record's seal follows the one before it and the `end` record counts the
  entries, so no record was removed, added, moved or edited since the export (its
  labels included: object names, usernames, workflow types).

It does not prove that an entry outside the filters, or written after the
checkpoint, is whole; nor anything against someone who holds the key.
"""

from __future__ import annotations

import argparse
import hmac
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from approvals.audit.export_file import (
    VERSION,
    ExportFileError,
    Record,
    entry_content_of,
    read_records,
)
from approvals.audit.hashing import GENESIS, checkpoint_payload, checkpoint_signature, entry_hash


class ExportInvalid(Exception):
    """The export does not verify; the message names the first record that fails."""


@dataclass
class ExportReport:
    """What a verified export holds."""

    format: str
    filters: dict[str, Any]
    checkpoint: dict[str, Any] | None
    entries: int = 0
    linked: int = 0  # entries that follow the entry before them in the file, in the chain
    gaps: int = 0  # places where the filters left chain entries out
    first: dict[str, Any] = field(default_factory=dict)
    last: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not any(self.filters.values())

    def summary(self) -> str:
        lines = [f"The audit export verifies ({self.format}, format {VERSION})."]
        wanted = ", ".join(f"{name} {value}" for name, value in self.filters.items() if value)
        lines.append(f"Filters: {wanted or 'none (the whole chain)'}.")
        if self.entries:
            lines.append(
                f"{self.entries:,} entries, ids {self.first['id']} to {self.last['id']}, "
                f"{self.first['timestamp']} to {self.last['timestamp']}: each one's chain hash "
                "verifies with this key."
            )
            lines.append(
                f"{self.linked:,} follow the entry before them in the chain; "
                f"{self.gaps:,} follow a gap where the filters left entries out."
            )
        else:
            lines.append("No entry matched the filters.")
        lines.append(
            "Every record is sealed in order: no line was removed, added, moved or edited."
        )
        if self.checkpoint:
            checkpoint = self.checkpoint
            lines.append(
                f"Checkpoint #{checkpoint['checkpoint']} of {checkpoint['at']} (entry "
                f"{checkpoint['entry']}, {checkpoint['entries']:,} entries, head "
                f"{checkpoint['head'][:16]}…) is signed with this key and matches its entry; "
                "compare it with the line in your checkpoint file."
            )
            if self.complete:
                lines.append(
                    "The file holds the whole chain, from its first entry to the checkpoint's."
                )
        return "\n".join(lines)


def verify_export(lines: Iterable[str], *, key: bytes, format: str = "") -> ExportReport:
    """Check an export's records against `key`; return what holds, or raise ExportInvalid
    (a record that fails) or ExportFileError (one that cannot be read)."""
    records = iter(read_records(lines))
    header = next(records, None)
    if header is None:
        raise ExportInvalid("The file is empty: it holds no export.")
    if header.kind != "export":
        raise ExportInvalid(f"Line {header.line} is not the export record the file starts with.")
    report = _check_header(header, key=key, format=format)
    # The first entry follows the chain's start only if it is the chain's first entry.
    previous_seal, previous_hash = header.seal, GENESIS
    ended = None
    for record in records:
        if ended is not None:
            raise ExportInvalid(
                f"Line {record.line} follows the end record (line {ended}): it was added."
            )
        if record.kind == "end":
            _check_end(record, report, previous_seal, key=key)
            ended = record.line
            continue
        if record.kind != "entry":
            raise ExportInvalid(f"Line {record.line} is a {record.kind!r} record, not an entry.")
        previous_hash = _check_entry(record, report, previous_seal, previous_hash, key=key)
        previous_seal = record.seal
    if ended is None:
        raise ExportInvalid(
            f"The file stops after {report.entries:,} entries without its end record: "
            "it was cut short."
        )
    _check_complete(report)
    return report


def _check_header(header: Record, *, key: bytes, format: str) -> ExportReport:
    fields = header.fields
    if fields.get("version") != VERSION:
        raise ExportInvalid(
            f"The export is of format version {fields.get('version')!r}; this script reads "
            f"version {VERSION}."
        )
    checkpoint = fields.get("checkpoint")
    if checkpoint is not None:
        _check_checkpoint(checkpoint, fields.get("anchor"), key=key)
    if not header.follows("", key=key):
        raise ExportInvalid(
            f"The export record (line {header.line}) is not sealed with this key: the key is "
            "wrong, or the record was altered."
        )
    filters = fields.get("filters") or {}
    return ExportReport(format=format, filters=dict(filters), checkpoint=checkpoint)


def _check_checkpoint(checkpoint: dict[str, Any], anchor: Any, *, key: bytes) -> None:
    try:
        payload = checkpoint_payload(
            at=checkpoint["at"],
            entry=checkpoint["entry"],
            entries=checkpoint["entries"],
            head=checkpoint["head"],
        )
        signed = hmac.compare_digest(
            str(checkpoint["signature"]), checkpoint_signature(payload, key=key)
        )
    except (KeyError, TypeError):
        raise ExportInvalid("The export's checkpoint lacks a field: it was altered.") from None
    if not signed:
        raise ExportInvalid(
            f"Checkpoint #{checkpoint.get('checkpoint')} in the export record is not signed "
            "with this key: the key is wrong, or the checkpoint was altered."
        )
    if not isinstance(anchor, dict):
        raise ExportInvalid("The export record has a checkpoint but not the entry it names.")
    if anchor.get("id") != checkpoint["entry"] or anchor.get("hash") != checkpoint["head"]:
        raise ExportInvalid(
            f"The checkpoint names entry {checkpoint['entry']} with hash "
            f"{checkpoint['head'][:16]}…, but the export record carries entry "
            f"{anchor.get('id')} with another: it was altered."
        )
    if not _hash_fits(anchor, key=key):
        raise ExportInvalid(
            f"Entry {anchor['id']}, which the checkpoint names, does not match its chain hash: "
            "one of its fields in the export record was changed."
        )


def _check_entry(
    record: Record,
    report: ExportReport,
    previous_seal: str,
    previous_hash: str | None,
    *,
    key: bytes,
) -> str:
    fields = record.fields
    name = _name(record)
    if not _hash_fits(fields, key=key):
        raise ExportInvalid(
            f"{name} does not match its chain hash: one of its fields was changed after it "
            "was written (in the file, or in the database before the export)."
        )
    if not record.follows(previous_seal, key=key):
        raise ExportInvalid(
            f"{name} breaks the export's seal: a line before it was removed, added or moved, "
            "or one of its labels (object name, username, workflow type) was changed."
        )
    if report.last and fields["id"] <= report.last["id"]:
        raise ExportInvalid(f"{name} comes after entry {report.last['id']}: out of order.")
    if fields["previous"] == previous_hash:
        report.linked += 1
    elif report.complete:
        after = f"entry {report.last['id']}" if report.last else "the chain's start"
        raise ExportInvalid(
            f"{name} does not follow {after} in the chain, yet the export has no filter: "
            "entries between them were deleted from the audit log before the export."
        )
    else:
        report.gaps += 1
    report.entries += 1
    if not report.first:
        report.first = fields
    report.last = {"id": fields["id"], "hash": fields["hash"], "timestamp": fields["timestamp"]}
    return fields["hash"]


def _check_end(record: Record, report: ExportReport, previous_seal: str, *, key: bytes) -> None:
    if not record.follows(previous_seal, key=key):
        raise ExportInvalid(
            f"The end record (line {record.line}) breaks the export's seal: a line before it "
            "was removed, added or moved, or the end record was changed."
        )
    if record.fields.get("entries") != report.entries:
        raise ExportInvalid(
            f"The end record counts {record.fields.get('entries')} entries but the file holds "
            f"{report.entries}."
        )


def _check_complete(report: ExportReport) -> None:
    checkpoint = report.checkpoint
    if not report.complete or checkpoint is None:
        return
    if (
        report.last.get("id") != checkpoint["entry"]
        or report.last.get("hash") != checkpoint["head"]
        or report.entries != checkpoint["entries"]
    ):
        raise ExportInvalid(
            f"The export has no filter, so it should end at the checkpoint's entry "
            f"{checkpoint['entry']} with {checkpoint['entries']:,} entries; it ends at entry "
            f"{report.last.get('id')} with {report.entries:,}."
        )


def _hash_fits(fields: dict[str, Any], *, key: bytes) -> bool:
    try:
        expected = entry_hash(str(fields["previous"]), entry_content_of(fields, key=key), key=key)
    except (KeyError, TypeError):
        return False
    return hmac.compare_digest(str(fields.get("hash")), expected)


def _name(record: Record) -> str:
    fields = record.fields
    return (
        f"Entry {fields.get('id')} (line {record.line}: {fields.get('timestamp')}, "
        f"{fields.get('event')} on {fields.get('object_repr')!r} by "
        f"{fields.get('actor_username') or 'nobody'})"
    )


def read_key(path: str | Path) -> bytes:
    """Return the audit key held in `path`: its bytes, one final newline left out."""
    data = Path(path).read_bytes()
    for ending in (b"\r\n", b"\n"):
        if data.endswith(ending):
            return data[: -len(ending)]
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m approvals.audit.verify_export",
        description="Verify a Baton audit export (CSV or NDJSON) with the audit key.",
    )
    parser.add_argument("file", help="the export (from manage.py export_audit or the console)")
    parser.add_argument("keyfile", help="a file holding the audit key (BATON_AUDIT_KEY's value)")
    args = parser.parse_args(argv)
    try:
        key = read_key(args.keyfile)
    except OSError as error:
        print(f"Cannot read the key file {args.keyfile}: {error.strerror}.", file=sys.stderr)
        return 2
    if not key:
        print(f"The key file {args.keyfile} is empty.", file=sys.stderr)
        return 2
    try:
        with open(args.file, encoding="utf-8", newline="") as file:
            first = file.readline()
            file.seek(0)
            format = "ndjson" if first.lstrip().startswith("{") else "csv"
            report = verify_export(file, key=key, format=format)
    except OSError as error:
        print(f"Cannot read {args.file}: {error.strerror}.", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"{args.file} is not UTF-8 text: it is not an audit export.", file=sys.stderr)
        return 2
    except (ExportFileError, ExportInvalid) as error:
        print(f"FAILED: {error}", file=sys.stderr)
        return 1
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
