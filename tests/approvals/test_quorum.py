"""N of M as a pure decision: approved at N, rejected once N is out of reach."""

from __future__ import annotations

from approvals.quorum import Shares, Verdict, verdict


class TestVerdict:
    def test_n_approvals_approve(self):
        assert verdict(Shares(approved=2, open=1), required=2) is Verdict.APPROVED

    def test_too_many_rejections_reject(self):
        assert verdict(Shares(approved=0, rejected=2, open=1), required=2) is Verdict.REJECTED

    def test_a_request_for_changes_sends_it_back_whatever_else(self):
        shares = Shares(approved=2, changes_requested=1)

        assert verdict(shares, required=2) is Verdict.CHANGES_REQUESTED

    def test_shares_nobody_may_decide_make_it_unreachable(self):
        shares = Shares(rejected=1, open=1, undecidable=1)

        assert verdict(shares, required=2) is Verdict.UNREACHABLE

    def test_from_the_start_when_fewer_may_decide_than_it_needs(self):
        assert verdict(Shares(open=1, undecidable=2), required=2) is Verdict.UNREACHABLE

    def test_while_enough_may_still_approve_it_waits(self):
        assert verdict(Shares(approved=1, open=1, undecidable=1), required=2) is None
