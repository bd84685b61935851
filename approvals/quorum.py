"""N of M: whether an approval's shares have reached a decision, or never can.

Pure: the counts come in, a verdict comes out. An approval that needs `required`
approvals is approved once it has them, and rejected once it cannot get them:
too many shares were rejected, or the shares still open are held by nobody who
may decide them (separation of duties bars the requester and, where one person
decides at most one stage, whoever decided an earlier one; and N of M means N
different people).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from django.utils.translation import gettext, ngettext


class Verdict(Enum):
    APPROVED = "approved"
    REJECTED = "rejected"
    CHANGES_REQUESTED = "changes_requested"
    # Rejected too, with a reason: the approvals still possible are too few.
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Shares:
    """One approval node's shares in one round, counted."""

    approved: int = 0
    rejected: int = 0
    changes_requested: int = 0
    open: int = 0  # live shares someone may still decide
    undecidable: int = 0  # live shares nobody may decide


def verdict(shares: Shares, *, required: int) -> Verdict | None:
    """Return how the approval ends now, or None while it can still go either way."""
    if shares.changes_requested:
        # One reviewer asking for changes sends it back; the next round asks everyone again.
        return Verdict.CHANGES_REQUESTED
    if shares.approved >= required:
        return Verdict.APPROVED
    total = shares.approved + shares.rejected + shares.open + shares.undecidable
    if shares.rejected > total - required:
        return Verdict.REJECTED
    if shares.approved + shares.open < required:
        return Verdict.UNREACHABLE
    return None


def unreachable_reason(shares: Shares, *, required: int, barred: list[str]) -> str:
    """Say, in words of the active language, why an approval can no longer get the
    approvals it needs."""
    needs = ngettext(
        "This approval needs %(count)s approval and can no longer get it",
        "This approval needs %(count)s approvals and can no longer get them",
        required,
    ) % {"count": required}
    counts = [
        gettext("%(count)s approved") % {"count": shares.approved},
        gettext("%(count)s rejected") % {"count": shares.rejected},
    ]
    if shares.open:
        counts.append(gettext("%(count)s still open") % {"count": shares.open})
    left = ngettext(
        "nobody who may decide is left for %(count)s share (held by %(holders)s, whom"
        " separation of duties keeps from deciding it)",
        "nobody who may decide is left for %(count)s shares (held by %(holders)s, whom"
        " separation of duties keeps from deciding them)",
        shares.undecidable,
    ) % {
        "count": shares.undecidable,
        "holders": ", ".join(barred) if barred else gettext("nobody"),
    }
    return gettext("%(needs)s (%(counts)s): %(left)s. It is rejected.") % {
        "needs": needs,
        "counts": ", ".join(counts),
        "left": left,
    }
