"""The two SVG charts draw what their table twins say: rendered through ``macros/charts.html`` and
parsed back as XML, the geometry follows the numbers (bars stacked in order and as long as their
parts, curves ordered as their peaks)."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from typing import Any

from hypothesis import given, settings

from app.ledger.estimate import estimate
from app.ledger.peak.fit import CURVE_DPS
from app.ledger.scenario import Scenario, parse_scenario
from app.receipts.display import gb
from app.web.http.templating import templates
from app.web.views.charts import (
    FIT_BOTTOM,
    FIT_HEIGHT,
    FIT_TOP,
    LABEL,
    PARTS,
    TICK_GAP,
    FitChart,
    fit_chart,
    peak_chart,
)
from tests.support import paths
from tests.support.strategies import scenarios

SVG = "{http://www.w3.org/2000/svg}"
CHARTS: Any = templates.get_template("macros/charts.html").module  # the macros, callable from Python


def _fit(s: Scenario) -> FitChart:
    e = estimate(s)
    return fit_chart(e.fit.curve, s.capacity_bytes, s.dp, tuple(st.peak.total for st in e.ledger.stages))


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
    root = _svg(str(CHARTS.fit_chart(_fit(s))))
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
    from app.web.views.page import page_context, view

    s = Scenario()
    v = view({}, s, None)
    page = templates.get_template("index.html").render(page_context(v))
    assert v.results is not None and v.results.lower is not None
    assert str(CHARTS.peak_chart(v.results.peak.chart)) in page
    assert str(CHARTS.fit_chart(v.results.lower.fit.chart)) in page


# --- colours, textures, labels and the current D (issue 14, item 8) --------------------------------

CSS = (paths.ROOT / "static" / "app.css").read_text(encoding="utf-8")
ROOT_RULE = CSS[CSS.index(":root {") : CSS.index("}", CSS.index(":root {"))]
COLOURS = dict(re.findall(r"--([a-z0-9-]+):\s*(#[0-9a-fA-F]{6})\b", ROOT_RULE))
# Presenter sizes (static/app.css, body.present): the labels 15 px bold, the ticks 14 px.
LABEL_SIZE, TICK_SIZE = 15 * 1.1, 14  # bold text is about a tenth wider


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_matches_wcag_reference_values() -> None:
    assert round(contrast("#000000", "#ffffff"), 2) == 21.0
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48
    assert contrast("#ffffff", "#ffffff") == 1.0


def test_every_chart_colour_has_3_to_1_contrast_against_the_page() -> None:
    """WCAG 1.4.11 (non-text contrast): each stage's curve, each peak part, the capacity line and
    the current D's marker, as the stylesheet sets them, against the page's background."""
    background = COLOURS["bg"]
    chart = {name: value for name, value in COLOURS.items() if name.startswith("c-")}
    stages = [f"c-stage{stage}" for stage in range(4)]
    parts = [f"c-{part}" for part, _ in PARTS]
    assert set(stages + parts + ["c-capacity", "c-now"]) <= set(chart)
    low = {
        name: round(contrast(value, background), 2) for name, value in chart.items() if contrast(value, background) < 3
    }
    assert low == {}
    # and those variables are the colours drawn: each curve, dot, pattern and line uses its own
    for stage in range(4):
        assert re.search(rf"\.curve\.stage{stage} \{{ stroke: var\(--c-stage{stage}\)", CSS)
        assert re.search(rf"\.dot\.stage{stage} \{{ fill: var\(--c-stage{stage}\)", CSS)
    for part, _ in PARTS:
        assert f".pat.{part} .pat-bg {{ fill: var(--c-{part}); }}" in CSS
    assert "line.capacity { stroke: var(--c-capacity);" in CSS
    assert ".now-line { stroke: var(--c-now);" in CSS
    assert not re.search(r"\.seg[^{]*\{[^}]*fill:", CSS)  # a CSS fill would hide a part's texture


def test_the_stages_and_the_capacity_and_contingency_are_told_apart() -> None:
    # the contingency segment and the capacity line: clearly different colours
    assert contrast(COLOURS["c-contingency"], COLOURS["c-capacity"]) >= 2
    # each stage's curve has a dash of its own (stage 0 solid), so colour is not the only cue
    dashes = [re.search(rf"\.curve\.stage{stage} \{{[^}}]*\}}", CSS) for stage in range(4)]
    found = [re.search(r"stroke-dasharray: ([0-9 ]+);", m.group(0)) if m else None for m in dashes]
    patterns = [d.group(1) if d else "solid" for d in found]
    assert len(set(patterns)) == 4


def _patterns(root: ET.Element) -> dict[str, str]:
    """Each pattern's id and its texture (the path over its colour; "" for a plain one)."""
    out = {}
    for pattern in root.iter(f"{SVG}pattern"):
        path = pattern.find(f"{SVG}path")
        out[pattern.get("id", "")] = path.get("d", "") if path is not None else ""
    return out


def text_width(text: str, size: float) -> float:
    """A generous width of ``text`` in DejaVu Sans (Chromium's fallback here) at ``size`` px: digits
    0.64 em, punctuation and spaces 0.32, capitals 0.78, the rest 0.64 (lower case is at most that)."""
    em = 0.0
    for c in text:
        em += 0.64 if c.isdigit() else 0.32 if c in ",. " else 0.78 if c.isupper() else 0.64
    return em * size


def _label_fits(x: int, anchor: str, text: str, width: int, size: float) -> bool:
    extent = text_width(text, size)
    start = {"start": x, "middle": x - extent / 2, "end": x - extent}[anchor]
    return start >= 0 and start + extent <= width


@settings(max_examples=60)
@given(scenarios())
def test_each_peak_part_has_a_texture_of_its_own_and_the_capacity_line_is_labelled(s: Scenario) -> None:
    e = estimate(s)
    chart = peak_chart(e.ledger, s.capacity_bytes)
    root = _svg(str(CHARTS.peak_chart(chart)))
    patterns = _patterns(root)
    assert sorted(patterns) == sorted(f"peak-pat-{part}" for part, _ in PARTS)
    assert len(set(patterns.values())) == len(PARTS)  # parts differ without colour
    for rect in root.findall(f"{SVG}rect"):
        part = (rect.get("class") or "").removeprefix("seg ")
        assert rect.get("fill") == f"url(#peak-pat-{part})"
    label = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "capacity-label")
    assert label.text == f"capacity {gb(s.capacity_bytes)}"
    assert _label_fits(int(label.get("x", "")), label.get("text-anchor", ""), label.text, chart.width, LABEL_SIZE)
    line = next(el for el in root.findall(f"{SVG}line") if el.get("class") == "capacity")
    assert int(line.get("y1", "")) > int(label.get("y", ""))  # the line starts under its label


def test_a_second_peak_chart_on_a_page_gets_its_own_ids() -> None:
    e = estimate(Scenario())
    root = _svg(str(CHARTS.peak_chart(peak_chart(e.ledger, Scenario().capacity_bytes), "b-peak")))
    assert root.get("aria-labelledby") == "b-peak-title b-peak-desc"
    assert all(i.startswith("b-peak-pat-") for i in _patterns(root))
    assert all((r.get("fill") or "").startswith("url(#b-peak-pat-") for r in root.findall(f"{SVG}rect"))


@settings(max_examples=60)
@given(scenarios())
def test_the_fit_chart_s_ticks_are_ordered_spaced_and_inside_it(s: Scenario) -> None:
    chart = _fit(s)
    ys = [t.y for t in chart.y_ticks]
    assert ys == sorted(set(ys))  # top to bottom, largest value first
    assert all(b - a >= TICK_GAP for a, b in itertools.pairwise(ys))
    assert all(FIT_TOP <= y - 4 <= chart.bottom for y in ys)
    assert all(_label_fits(t.x, "end", t.label, chart.width, TICK_SIZE) for t in chart.y_ticks)
    if max(peaks for _, peaks in estimate(s).fit.curve)[0] >= 10**9:  # a real model: a readable axis
        assert len(chart.y_ticks) >= 3
    # the last D is labelled, and no x label is clipped, at presenter size
    assert chart.x_ticks[-1].label == f"{chart.last_dp:,}"
    assert all(_label_fits(t.x, "middle", t.label, chart.width, TICK_SIZE) for t in chart.x_ticks)
    for a, b in itertools.pairwise(chart.x_ticks):  # "32,768" and "131,072" do not touch
        assert (b.x - text_width(b.label, TICK_SIZE) / 2) - (a.x + text_width(a.label, TICK_SIZE) / 2) >= 6


def test_the_seed_s_fit_chart_has_round_y_ticks() -> None:
    labels = [t.label for t in _fit(Scenario()).y_ticks]
    assert len(labels) >= 4
    assert {"100 GB", "50 GB"} <= set(labels)


@settings(max_examples=60)
@given(scenarios())
def test_the_current_d_is_marked_with_each_stage_s_peak_there(s: Scenario) -> None:
    e = estimate(s)
    chart = _fit(s)
    root = _svg(str(CHARTS.fit_chart(chart)))
    marker = next(el for el in root.iter(f"{SVG}line") if el.get("class") == "now-line")
    x = int(marker.get("x1", ""))
    assert marker.get("x2") == str(x) and chart.left <= x <= chart.right
    curve_xs = [int(p.split(",")[0]) for p in chart.curves[0].points.split()]
    for (d, _), curve_x in zip(e.fit.curve, curve_xs, strict=True):
        assert (curve_x <= x) if d <= s.dp else (curve_x >= x)  # between its neighbours on the axis
    label = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "now-label")
    assert label.text == f"D = {s.dp:,}"
    assert _label_fits(int(label.get("x", "")), "middle", label.text, chart.width, LABEL_SIZE)
    dots = list(root.iter(f"{SVG}circle"))
    assert [c.get("class") for c in dots] == [f"dot stage{stage}" for stage in range(4)]
    peaks = [st.peak.total for st in e.ledger.stages]
    for (peak_a, dot_a), (peak_b, dot_b) in itertools.product(zip(peaks, dots, strict=True), repeat=2):
        if peak_a < peak_b:
            assert int(dot_a.get("cy", "")) >= int(dot_b.get("cy", ""))
    if s.dp in CURVE_DPS:  # on a drawn D, each dot sits on its stage's curve
        i = CURVE_DPS.index(s.dp)
        for curve, dot in zip(chart.curves, dots, strict=True):
            assert curve.points.split()[i] == f"{dot.get('cx')},{dot.get('cy')}"
    capacity = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "capacity-label")
    assert capacity.text == f"capacity {gb(s.capacity_bytes)}"
    anchor = capacity.get("text-anchor", "")
    assert _label_fits(int(capacity.get("x", "")), anchor, capacity.text, chart.width, LABEL_SIZE)
    assert (anchor == "start") == (x * 2 > chart.left + chart.right)  # on the side away from the marker


def test_a_total_the_capacity_line_crosses_is_painted_over_it_with_a_halo() -> None:
    """The seed on a 60 GB device: stage 1's 58.50 GB total starts left of the 60 GB line and runs across it. SVG
    paints in document order, so the line comes before every total, and the totals' halo in the page colour
    (static/app.css) keeps the line off their glyphs."""
    s = parse_scenario({"capacity_bytes": 60 * 10**9})
    chart = peak_chart(estimate(s).ledger, s.capacity_bytes)
    stage1 = chart.bars[1]
    assert stage1.total_x < chart.capacity_x < stage1.total_x + 40  # the label's first glyphs straddle the line
    root = _svg(str(CHARTS.peak_chart(chart)))
    order = [el.get("class") or "" for el in root if el.tag in (f"{SVG}line", f"{SVG}text")]
    line = order.index("capacity")
    totals = [i for i, name in enumerate(order) if name.startswith("total ")]
    assert len(totals) == 4 and min(totals) > line, order
    css = (paths.ROOT / "static" / "app.css").read_text(encoding="utf-8")
    halo = re.search(r"\.chart \.total \{[^}]*paint-order: stroke;[^}]*stroke: var\(--bg\)", css)
    assert halo is not None
