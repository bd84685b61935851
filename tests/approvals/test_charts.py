"""Server-drawn SVG charts: bars sized to their numbers, every number in a title, the
summary in the aria-label, text escaped, and no inline style (the CSP forbids it)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from approvals.console import charts

SVG = "{http://www.w3.org/2000/svg}"


def parsed(markup: str) -> ET.Element:
    return ET.fromstring(markup.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


class TestColumns:
    def test_stacks_each_columns_parts_in_proportion_to_the_tallest_column(self):
        svg = parsed(
            charts.columns(
                points=[
                    charts.Column("Nov 30", (charts.Part(2, "chart-ok", "2 succeeded"),)),
                    charts.Column(
                        "Dec 1",
                        (
                            charts.Part(3, "chart-ok", "3 succeeded"),
                            charts.Part(1, "chart-bad", "1 failed"),
                        ),
                    ),
                ],
                label="order: 6 runs finished, 1 of them failed.",
            )
        )

        rects = svg.findall(f"{SVG}rect")
        heights = [float(rect.get("height")) for rect in rects]
        plot = charts.HEIGHT - charts.AXIS
        assert heights == [plot * 2 / 4, plot * 3 / 4, plot * 1 / 4]
        assert [rect.get("class") for rect in rects] == ["chart-ok", "chart-ok", "chart-bad"]
        assert [rect.find(f"{SVG}title").text for rect in rects] == [
            "Nov 30: 2 succeeded",
            "Dec 1: 3 succeeded",
            "Dec 1: 1 failed",
        ]
        assert svg.get("role") == "img"
        assert svg.get("aria-label") == "order: 6 runs finished, 1 of them failed."

    def test_draws_an_all_zero_series_flat_and_an_empty_one_as_its_label_alone(self):
        flat = parsed(
            charts.columns(
                points=[charts.Column("Dec 1", (charts.Part(0, "chart-ok", "0"),))], label="none"
            )
        )
        empty = parsed(charts.columns(points=[], label="No runs."))

        assert [rect.get("height") for rect in flat.findall(f"{SVG}rect")] == ["0.0"]
        assert empty.get("aria-label") == "No runs."
        assert list(empty) == []


class TestSpans:
    def test_draws_median_and_95th_percentile_bars_on_one_scale(self):
        svg = parsed(
            charts.spans(
                rows=[charts.Span("expense", 2, 10), charts.Span("order", 5, 5)],
                label="cycle times",
                unit="h",
            )
        )

        widths = {
            rect.find(f"{SVG}title").text: float(rect.get("width"))
            for rect in svg.findall(f"{SVG}rect")
        }
        assert widths["expense: 95th percentile 10 h"] == 2 * widths["order: 95th percentile 5 h"]
        assert widths["expense: median 2 h"] == widths["expense: 95th percentile 10 h"] / 5


class TestSafety:
    def test_escapes_names_and_uses_no_inline_style(self):
        markup = str(
            charts.spans(
                rows=[charts.Span('<script>alert("x")</script>', 1, 2)],
                label='a "quoted" <label>',
                unit="h",
            )
        ) + str(charts.columns(points=[charts.Column("<b>", ())], label="<i>"))

        assert "<script>" not in markup
        assert "&lt;script&gt;" in markup
        assert 'aria-label="a &quot;quoted&quot; &lt;label&gt;"' in markup
        assert not re.search(r"\sstyle=", markup)
