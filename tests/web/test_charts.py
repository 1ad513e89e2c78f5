"""The two SVG charts draw what their table twins say: rendered through ``macros/charts.html`` and
parsed back as XML, the geometry follows the numbers (bars stacked in order and as long as their
parts, curves ordered as their peaks)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from hypothesis import given, settings

from app.ledger.estimate import estimate
from app.ledger.fit import CURVE_DPS
from app.ledger.scenario import Scenario
from app.web.charts import FIT_BOTTOM, FIT_HEIGHT, FIT_TOP, LABEL, PARTS, fit_chart, peak_chart
from app.web.templating import templates
from tests.strategies import scenarios

SVG = "{http://www.w3.org/2000/svg}"
CHARTS: Any = templates.get_template("macros/charts.html").module  # the macros, callable from Python


def _svg(markup: str) -> ET.Element:
    # The charts are inline SVG in HTML (no namespace declared); give ElementTree one to parse.
    return ET.fromstring(markup.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))  # noqa: S314 - our own output


@settings(max_examples=60)
@given(scenarios())
def test_each_bar_stacks_its_nonzero_parts_in_order_and_the_longer_peak_has_the_longer_bar(s: Scenario) -> None:
    e = estimate(s)
    root = _svg(str(CHARTS.peak_chart(peak_chart(e.ledger, s.capacity_bytes))))
    rects = root.findall(f"{SVG}rect")
    ends = []
    for st in e.ledger.stages:
        p = st.peak
        values = (p.persistent, p.gather, p.buckets, p.activations, p.overhead, p.contingency)
        mine = [r for r in rects if (r.findtext(f"{SVG}title") or "").startswith(f"stage {st.stage} ")]
        drawn = [part for (part, _), v in zip(PARTS, values, strict=True) if v]
        assert [r.get("class") for r in mine] == [f"seg {part}" for part in drawn]
        x = LABEL  # the bars start right of the stage labels
        for r in mine:
            # each part starts where the one before it ends (a part too small to see still gets
            # one pixel, which the next part may cover)
            assert int(r.get("x", "")) in (x, x - 1)
            x = int(r.get("x", "")) + int(r.get("width", ""))
        ends.append((p.total, x))
    for total_a, end_a in ends:
        for total_b, end_b in ends:
            if total_a < total_b:
                assert end_a <= end_b  # the longer peak never has the shorter bar


@settings(max_examples=60)
@given(scenarios())
def test_each_fit_curve_has_a_point_per_degree_and_a_higher_peak_is_drawn_higher(s: Scenario) -> None:
    e = estimate(s)
    root = _svg(str(CHARTS.fit_chart(fit_chart(e.fit.curve, s.capacity_bytes))))
    lines = root.findall(f"{SVG}polyline")
    assert [line.get("class") for line in lines] == [f"curve stage{stage}" for stage in range(4)]
    xs_seen = None
    for stage, line in enumerate(lines):
        points = [tuple(map(int, p.split(","))) for p in (line.get("points") or "").split()]
        assert len(points) == len(CURVE_DPS)
        xs = [x for x, _ in points]
        assert xs == sorted(set(xs))  # left to right, one x per degree, the same for every stage
        assert xs_seen in (None, xs)
        xs_seen = xs
        drawn = list(zip([peaks[stage] for _, peaks in e.fit.curve], [y for _, y in points], strict=True))
        for peak_a, y_a in drawn:
            for peak_b, y_b in drawn:
                if peak_a < peak_b:
                    assert y_a >= y_b  # y grows downwards: a higher peak is never drawn lower
                elif peak_a == peak_b:
                    assert y_a == y_b  # stage 0's flat line included
        assert all(FIT_TOP <= y <= FIT_HEIGHT - FIT_BOTTOM for _, y in points)  # inside the plot
    capacity_line = next(el for el in root.findall(f"{SVG}line") if el.get("class") == "capacity")
    assert re.fullmatch(r"capacity .*", capacity_line.findtext(f"{SVG}title") or "")


def test_the_charts_on_the_page_are_the_macros_output() -> None:
    """The page draws each chart with the same macro, from the same geometry."""
    from app.web.views import page_context, view

    s = Scenario()
    v = view({}, s, None)
    page = templates.get_template("index.html").render(page_context(v))
    assert v.results is not None
    assert str(CHARTS.peak_chart(v.results.peak.chart)) in page
    assert str(CHARTS.fit_chart(v.results.fit.chart)) in page
