"""The benchmark table: every catalogued figure listed, ratios and targets judged."""

from __future__ import annotations

from bench.report import CATALOGUE, Result, Target, render, rows


class TestTarget:
    def test_a_ratio_target_judges_figure_over_baseline(self):
        target = Target(1.3, on="ratio")

        assert target.met(value=10.0, ratio=1.2) is True
        assert target.met(value=1.0, ratio=1.4) is False

    def test_a_minimum_is_met_at_or_above_it(self):
        assert Target(0.8, on="ratio", direction="min").met(value=1.0, ratio=0.8) is True

    def test_nothing_measured_is_neither_met_nor_missed(self):
        assert Target(5).met(value=None, ratio=None) is None


class TestRows:
    def test_every_catalogued_figure_gets_a_row_in_order(self):
        table = rows(results={}, failures={})

        assert [row.key for row in table] == list(CATALOGUE)

    def test_a_figure_of_a_failed_group_says_it_was_not_measured(self):
        table = rows(results={}, failures={"sweep": "seed failed"})

        sweep = next(row for row in table if row.key == "sweep_large_s")
        assert sweep.figure == "not measured"
        assert sweep.met == "—"

    def test_the_ratio_is_figure_over_baseline_and_judged_by_the_target(self):
        table = rows(
            results={"step_via_celery_ms": Result("step_via_celery_ms", 2.4, 2.0)}, failures={}
        )

        row = next(row for row in table if row.key == "step_via_celery_ms")
        assert (row.ratio, row.target, row.met) == ("1.20x", "≤ 1.30x", "yes")

    def test_counts_beside_counts_show_no_ratio(self):
        table = rows(
            results={"inbox_queries_first": Result("inbox_queries_first", 5, 2)}, failures={}
        )

        row = next(row for row in table if row.key == "inbox_queries_first")
        assert (row.ratio, row.met) == ("—", "NO")


class TestRender:
    def test_the_table_names_every_figure_and_each_note(self):
        results = {"commits_per_start": Result("commits_per_start", 1, note="one transaction")}

        text = render(rows(results=results, failures={}), header="Baton benchmarks")

        assert all(spec.what in text for spec in CATALOGUE.values())
        assert "- commits per start: one transaction" in text

    def test_failures_are_explained_under_the_table(self):
        text = render(
            rows(results={}, failures={"celery": "workers did not start"}), failures={"celery": "x"}
        )

        assert "- celery: x" in text
