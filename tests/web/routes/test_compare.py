"""Compare two scenarios: the diff as plain data, the /compare page and its JSON and CSV twins.

Every expected figure is an exact integer: derived by hand from the spec's formulas, or read from
``/api/estimate`` for the same side, so the comparison is held to the two receipts it compares.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings

from app.ledger.scenario import DEFAULT_SCENARIO, Scenario, parse_scenario
from app.ledger.scenario.links import canonical_query
from app.receipts.compare import PEAK_CATEGORIES, PERSISTENT_CATEGORIES, compare, compare_link, comparison_json
from app.receipts.compare_out import ComparisonOut
from app.web.http.settings import Settings
from app.web.routes.compare import MAX_SIDE_CHARS
from tests.support.json_data import as_json_data
from tests.support.strategies import scenarios

SEED_D64 = DEFAULT_SCENARIO.with_(dp=64)
HOSTILE = '=HYPERLINK("x")<script>alert(1)</script>'


def compare_url(a: str, b: str, path: str = "/compare") -> str:
    return f"{path}?{urlencode((('a', a), ('b', b)))}"


# --------------------------------------------------------------------------- the diff as plain data


def test_seed_d8_against_d64_stage3_persistent_moves_by_exactly_minus_12_25_gb() -> None:
    """Stage 3 shards every class: ⌈7,000,000,000 ÷ D⌉ × (2 + 2 + 4 + 2 × 4) B.

    A (D = 8):  875,000,000 × 16 B = 14,000,000,000 B (14 GB)
    B (D = 64): 109,375,000 × 16 B =  1,750,000,000 B (1.75 GB)
    B − A = −12,250,000,000 B (−12.25 GB), exactly. Activations (20 GB declared) never move with D.
    """
    c = compare(DEFAULT_SCENARIO, SEED_D64)
    total = c.stages[3].persistent[-1]
    assert (total.category, total.a, total.b, total.diff) == ("total", 14_000_000_000, 1_750_000_000, -12_250_000_000)
    assert all(type(v) is int for v in (total.a, total.b, total.diff))
    for st in c.stages:
        activations = next(d for d in st.peak if d.category == "activations")
        assert (activations.a, activations.b, activations.moved) == (20_000_000_000, 20_000_000_000, False)
    assert [(i.name, i.a, i.b) for i in c.inputs] == [("dp", 8, 64)]


def test_what_moved_is_named_by_category_and_stage() -> None:
    """Stage 0 replicates every class, so D moves nothing persistent there; stage 1 shards master and
    optimizer states, stage 2 gradients too, stage 3 everything; the stage-3 gather grows with D."""
    moved = {(m.ledger, m.category): m.stages for m in compare(DEFAULT_SCENARIO, SEED_D64).moved}
    assert moved[("persistent", "parameters")] == (3,)
    assert moved[("persistent", "gradients")] == (2, 3)
    assert moved[("persistent", "master_weights")] == (1, 2, 3)
    assert moved[("persistent", "total")] == (1, 2, 3)
    assert moved[("peak", "gather")] == (3,)
    assert moved[("communication", "total")] == (0, 1, 2, 3)
    assert ("peak", "activations") not in moved and ("peak", "buckets") not in moved


def test_a_scenario_against_itself_moves_nothing() -> None:
    c = compare(SEED_D64, SEED_D64)
    assert c.moved == () and c.inputs == ()
    assert all(d.diff == 0 for st in c.stages for d in st.deltas)
    assert all(st.verdict == "unchanged" for st in c.stages)


def test_a_verdict_that_flips_is_named() -> None:
    """Seed at 80 GB: stage 3 peaks at 14 + 0.7 + 20 = 34.7 GB; at 30 GB capacity it no longer fits."""
    c = compare(DEFAULT_SCENARIO, DEFAULT_SCENARIO.with_(capacity_bytes=30_000_000_000))
    assert c.stages[3].peak[-1].a == 34_700_000_000
    assert c.stages[3].verdict == "no longer fits"
    assert c.stages[3].headroom.diff == -50_000_000_000
    assert compare(c.b, c.a).stages[3].verdict == "now fits"


@settings(max_examples=25)
@given(scenarios(), scenarios())
def test_every_difference_is_b_minus_a_of_the_two_receipts(a: Scenario, b: Scenario) -> None:
    c = compare(a, b)
    for st, sa, sb in zip(c.stages, c.a_receipt["stages"], c.b_receipt["stages"], strict=True):
        for d in st.persistent:
            assert (d.a, d.b) == (sa["persistent"][d.category], sb["persistent"][d.category])
        for d in st.peak:
            assert (d.a, d.b) == (sa["peak"][d.category], sb["peak"][d.category])
        assert (st.headroom.a, st.headroom.b) == (sa["headroom_bytes"], sb["headroom_bytes"])
        assert (st.communication.a, st.communication.b) == (sa["communication_bytes"], sb["communication_bytes"])
        assert all(d.diff == d.b - d.a and type(d.diff) is int for d in st.deltas)
    data = comparison_json(c)
    assert ComparisonOut.model_validate(data).model_dump(mode="json", by_alias=True) == as_json_data(data)


def test_the_compare_link_holds_each_side_s_canonical_query() -> None:
    a, b = DEFAULT_SCENARIO.with_(name="A & B = ?"), SEED_D64
    parts = dict(parse_qsl(urlsplit(compare_link(a, b)).query))
    assert parts == {"a": canonical_query(a), "b": canonical_query(b)}
    assert parse_scenario(dict(parse_qsl(parts["a"])), allow_unknown=False) == a


# --------------------------------------------------------------------------- the JSON and CSV twins


def _walk_ints(value: Any, path: str = "") -> Iterator[tuple[str, int]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk_ints(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk_ints(v, f"{path}[{i}]")
    elif isinstance(value, int) and not isinstance(value, bool):
        yield path, value


@pytest.mark.parametrize(
    ("a", "b"),
    [("", "dp=64"), ("model=llama-2-7b&dp=8", "model=llama-2-70b&dp=64&act_policy=full"), ("dp=16", "dp=16")],
)
def test_json_twin_carries_both_receipts_figures_and_b_minus_a(client: TestClient, a: str, b: str) -> None:
    r = client.get(compare_url(a, b, "/compare.json"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["link"].startswith("http://testserver/compare?")
    parts = dict(parse_qsl(urlsplit(body["link"]).query, keep_blank_values=True))
    assert parts == {"a": body["a"]["link"], "b": body["b"]["link"]}
    for side, query in (("a", a), ("b", b)):
        receipt = client.get("/api/estimate" + (f"?{query}" if query else "")).json()
        assert body[side]["scenario"] == receipt["scenario"]
        for mine, theirs in zip(body[side]["stages"], receipt["stages"], strict=True):
            assert mine["persistent"] == theirs["persistent"]
            assert mine["peak"] == {k: theirs["peak"][k] for k in PEAK_CATEGORIES}
            for key in ("stage", "fits", "headroom_bytes", "communication_bytes"):
                assert mine[key] == theirs[key]
    a_ints = dict(_walk_ints(body["a"]["stages"]))
    b_ints = dict(_walk_ints(body["b"]["stages"]))
    diff_ints = dict(_walk_ints(body["diff"]["stages"]))
    for path, value in a_ints.items():
        if not path.endswith(".stage"):
            assert diff_ints[path] == b_ints[path] - value, path
    assert set(diff_ints) == set(a_ints)
    for st in body["diff"]["stages"]:
        moved = {f"persistent.{k}" for k, v in st["persistent"].items() if v} | {
            f"peak.{k}" for k, v in st["peak"].items() if v
        }
        assert moved <= set(st["moved"])


def test_json_twin_d8_against_d64(client: TestClient) -> None:
    body = client.get(compare_url("", "dp=64", "/compare.json")).json()
    assert body["a"]["stages"][3]["persistent"]["total"] == 14_000_000_000
    assert body["b"]["stages"][3]["persistent"]["total"] == 1_750_000_000
    assert body["diff"]["stages"][3]["persistent"]["total"] == -12_250_000_000
    assert body["diff"]["inputs"] == [
        {"name": "dp", "a": 8, "b": 64, "a_source": None, "b_source": None, "peak_alone_bytes": -12_162_500_000,
         "alone_error": None}
    ]  # fmt: skip
    assert "peak.activations" not in body["diff"]["stages"][3]["moved"]


def test_b_omitted_is_a(client: TestClient) -> None:
    body = client.get("/compare.json?a=dp%3D16").json()
    assert body["b"] == body["a"] and body["diff"]["inputs"] == []


def _csv(data: bytes) -> list[dict[str, str]]:
    assert data.startswith(b"\xef\xbb\xbf")  # the UTF-8 byte order mark: Excel reads × and − right
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def test_csv_twin_holds_the_same_integers_and_diff_rows(client: TestClient) -> None:
    url = compare_url("", "dp=64")
    r = client.get(url.replace("/compare?", "/compare.csv?"))
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/csv; charset=utf-8"
    assert r.headers["content-disposition"].startswith('attachment; filename="zero3-lab-compare-')
    rows = _csv(r.content)
    assert list(rows[0]) == ["side", "stage", "ledger", "category", "bytes", "value"]
    figures = {(row["side"], row["stage"], row["ledger"], row["category"]): row for row in rows if row["stage"]}
    body = client.get(url.replace("/compare?", "/compare.json?")).json()
    for side in ("a", "b"):
        for st in body[side]["stages"]:
            stage = str(st["stage"])
            for cat in PERSISTENT_CATEGORIES:
                assert int(figures[(side, stage, "persistent", cat)]["bytes"]) == st["persistent"][cat]
            for cat in PEAK_CATEGORIES:
                assert int(figures[(side, stage, "peak", cat)]["bytes"]) == st["peak"][cat]
            assert int(figures[(side, stage, "fit", "headroom")]["bytes"]) == st["headroom_bytes"]
            assert int(figures[(side, stage, "communication", "total")]["bytes"]) == st["communication_bytes"]
    for (side, stage, ledger, cat), row in figures.items():
        if side == "diff":
            a, b = figures[("a", stage, ledger, cat)], figures[("b", stage, ledger, cat)]
            assert int(row["bytes"]) == int(b["bytes"]) - int(a["bytes"])
    assert figures[("diff", "3", "persistent", "total")]["bytes"] == "-12250000000"
    inputs = {(row["side"], row["category"]): row["value"] for row in rows if row["ledger"] == "input"}
    assert inputs[("a", "dp")] == "8" and inputs[("b", "dp")] == "64"


def test_csv_neutralises_a_hostile_name(client: TestClient) -> None:
    a = canonical_query(DEFAULT_SCENARIO.with_(name=HOSTILE))
    rows = _csv(client.get(compare_url(a, "dp=64", "/compare.csv")).content)
    name = next(row for row in rows if row["side"] == "a" and row["category"] == "name")
    assert name["value"] == "'" + HOSTILE


@pytest.mark.parametrize("path", ["/compare.json", "/compare.csv"])
@pytest.mark.parametrize(
    ("a", "b", "locs"),
    [
        ("dp=0", "dp=64", [["query", "a", "dp"]]),
        ("", "dp=64&param_bytes=3", [["query", "b", "param_bytes"]]),
        ("bogus=1", "dp=8.5", [["query", "a", "bogus"], ["query", "b", "dp"]]),
        ("x" * (MAX_SIDE_CHARS + 1), "", [["query", "a"]]),
    ],
)
def test_bad_sides_answer_422_naming_side_and_field(
    client: TestClient, path: str, a: str, b: str, locs: list[list[str]]
) -> None:
    r = client.get(compare_url(a, b, path))
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert [d["loc"] for d in detail] == locs
    for d in detail:
        name = ".".join(d["loc"][1:])
        assert d["field"] == name and d["msg"].startswith(f"{name}: ") and d["allowed"]


def test_a_side_at_its_bound_passes_the_query_cap_and_a_longer_query_is_414(client: TestClient) -> None:
    """Two sides of 2,048 characters that percent-encoding triples fit the /compare cap; the rest of
    the lab keeps its 2,048."""
    side = "name=" + "%" * (MAX_SIDE_CHARS - 5)  # every '%' is sent as %25
    r = client.get(compare_url(side, side, "/compare.json"))
    assert r.status_code == 422  # the name is refused, not the query
    assert [d["loc"] for d in r.json()["detail"]] == [["query", "a", "name"], ["query", "b", "name"]]
    cap = Settings().max_compare_query_chars
    assert client.get("/compare.json?a=" + "0" * cap).status_code == 414
    assert client.get("/?name=" + "x" * 2100).status_code == 414


@pytest.mark.parametrize("path", ["/compare", "/compare.json", "/compare.csv"])
def test_head_answers_like_get(client: TestClient, path: str) -> None:
    url = compare_url("", "dp=64", path)
    got, head = client.get(url), client.head(url)
    assert head.status_code == got.status_code == 200
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.content == b""
    bad = compare_url("dp=0", "", path)
    assert client.head(bad).status_code == client.get(bad).status_code == 422


def test_openapi_documents_the_twins(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    get = spec["paths"]["/compare.json"]["get"]
    assert get["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ComparisonOut"
    }
    assert {p["name"] for p in get["parameters"]} == {"a", "b"}
    assert {"422", "414"} <= set(get["responses"])
    assert "text/csv" in spec["paths"]["/compare.csv"]["get"]["responses"]["200"]["content"]
    assert "/compare" not in spec["paths"]
    out = spec["components"]["schemas"]["ComparisonOut"]
    assert set(out["required"]) == {"schema_version", "units", "link", "a", "b", "diff"}


# --------------------------------------------------------------------------- the page


class _Page(HTMLParser):
    """The comparison cells (side, stage, ledger, category) → bytes, the alerts, and the links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: dict[tuple[str, int, str, str], int] = {}
        self.classes: dict[tuple[str, int, str, str], str] = {}
        self.text: dict[tuple[str, int, str, str], str] = {}
        self.alerts: list[str] = []
        self.links: dict[str, str] = {}
        self._cell: tuple[str, int, str, str] | None = None
        self._alert = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-bytes" in a:
            key = (a["data-side"], int(a["data-stage"]), a["data-ledger"], a["data-category"])
            self.cells[key] = int(a["data-bytes"])
            self.classes[key] = a.get("class", "")
            self.text[key] = ""
            self._cell = key
        if a.get("role") == "alert":
            self._alert = True
            self.alerts.append("")
        if tag == "a" and a.get("id"):
            self.links[a["id"]] = a.get("href", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        if tag in ("li", "span", "div"):
            self._alert = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self.text[self._cell] += data
        if self._alert:
            self.alerts[-1] += data


def _page(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    p.close()
    return p


def test_page_shows_a_b_and_the_marked_difference(client: TestClient) -> None:
    r = client.get(compare_url("", "dp=64"))
    assert r.status_code == 200
    assert "HX-Request" in r.headers["vary"]
    p = _page(r.text)
    key = (3, "persistent", "total")
    assert p.cells[("a", *key)] == 14_000_000_000
    assert p.cells[("b", *key)] == 1_750_000_000
    assert p.cells[("diff", *key)] == -12_250_000_000
    assert "moved" in p.classes[("diff", *key)].split()
    assert "▼ −12.25 GB" in p.text[("diff", *key)]
    assert "−11.41 GiB" in p.text[("diff", *key)]  # 12,250,000,000 ÷ 2^30 = 11.408…
    assert "−12,250,000,000 B" in p.text[("diff", *key)]
    activations = ("diff", 3, "peak", "activations")
    assert "moved" not in p.classes[activations].split() and "unchanged" in p.text[activations]
    gather = ("diff", 3, "peak", "gather")  # (400M − 6.25M) × 2 − (400M − 50M) × 2 = +87,500,000 B
    assert p.cells[gather] == 87_500_000 and "▲ +0.09 GB" in p.text[gather]
    # every cell equals the JSON twin
    body = client.get(compare_url("", "dp=64", "/compare.json")).json()
    for (side, stage, ledger, cat), value in p.cells.items():
        if side == "diff":
            continue
        st = body[side]["stages"][stage]
        expected = {"persistent": st["persistent"], "peak": st["peak"]}.get(ledger, {}).get(cat)
        if ledger == "fit":
            expected = st["headroom_bytes"]
        if ledger == "communication":
            expected = st["communication_bytes"]
        assert value == expected, (side, stage, ledger, cat)
    assert p.links["compare-share"] == compare_url("", "dp=64")
    assert p.links["swap"] == compare_url("dp=64", "")
    assert '<link rel="alternate" type="application/json" href="/compare.json?a=&amp;b=dp%3D64">' in r.text


def test_page_names_what_changed_and_what_moved(client: TestClient) -> None:
    html = client.get(compare_url("", "dp=64")).text
    assert re.search(r'data-input="dp" data-alone="-12162500000"><code>dp</code>: 8 → 64', html)
    assert 'data-moved="persistent.gradients">persistent gradients &mdash; stages 2, 3' in html
    assert 'data-moved="peak.activations"' not in html


@pytest.mark.parametrize(
    ("a", "b", "alerts"),
    [
        ("dp=0", "", ["a.dp: 0 is out of range — allowed: 1 … 131,072"]),
        ("", "dp=64&bogus=1", ["b.bogus: is not a scenario field"]),
        ("x" * (MAX_SIDE_CHARS + 1), "dp=0", ["a: is 2,049 characters long", "b.dp: 0 is out of range"]),
    ],
)
def test_page_shows_bad_sides_inline_with_their_side(client: TestClient, a: str, b: str, alerts: list[str]) -> None:
    r = client.get(compare_url(a, b))
    assert r.status_code == 422
    found = _page(r.text).alerts
    assert len(found) == len(alerts)
    for got, want in zip(found, alerts, strict=True):
        assert got.startswith(want)


def test_the_form_live_update_answers_the_fragment_and_pushes_the_canonical_link(client: TestClient) -> None:
    form = {"a": "", "dp": "64", "params": "7B", "name": "", "gather_bytes": "", "unit_params": ""}
    r = client.get("/compare", params=form, headers={"HX-Request": "true"})
    assert r.status_code == 200
    assert r.headers["hx-push-url"] == compare_url("", "dp=64")
    assert r.text.startswith("<title>zero3-lab &mdash; compare: 7B parameters on 8 ranks vs 7B parameters on 64 ranks")
    assert '<section id="comparison"' in r.text
    assert _page(r.text).cells[("diff", 3, "persistent", "total")] == -12_250_000_000
    assert 'id="e-dp" hx-swap-oob="true"' in r.text


def test_a_bad_field_in_the_form_is_named_b_dot_field_and_kept_in_the_address(client: TestClient) -> None:
    r = client.get("/compare", params={"a": "dp=16", "dp": "0"}, headers={"HX-Request": "true"})
    assert r.status_code == 200  # htmx 2 swaps only 2xx answers
    assert _page(r.text).alerts == ["b.dp: 0 is out of range — allowed: 1 … 131,072"]
    assert "b.dp: 0 is out of range" in r.text.split('id="e-dp"')[1].split("</div>")[0]
    assert r.headers["hx-push-url"] == compare_url("dp=16", "dp=0")
    assert client.get(r.headers["hx-push-url"]).status_code == 422  # the reload shows the same error


def test_the_form_without_javascript_lands_on_the_shareable_link(client: TestClient) -> None:
    r = client.get("/compare", params={"a": "dp=16", "dp": "64"}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == compare_url("dp=16", "dp=64")


def test_the_form_is_b_prefilled_with_a_pinned(client: TestClient) -> None:
    html = client.get(compare_url("dp=16&name=run", "dp=64&params=13B")).text
    assert '<input type="hidden" name="a" value="dp=16&amp;name=run">' in html
    assert re.search(r'<input id="f-dp" name="dp" value="64"', html)
    assert re.search(r'<input id="f-params" name="params" value="13B"', html)
    assert 'hx-get="/compare"' in html and 'hx-push-url="true"' in html


def test_a_hostile_name_is_escaped_on_the_page(client: TestClient) -> None:
    a = canonical_query(DEFAULT_SCENARIO.with_(name=HOSTILE))
    r = client.get(compare_url(a, "dp=64"))
    assert r.status_code == 200
    assert "<script>alert" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text


def test_the_lab_s_answer_links_to_pin_the_scenario_as_a(client: TestClient) -> None:
    html = client.get("/?dp=16&name=a%20run").text
    query = canonical_query(parse_scenario({"dp": "16", "name": "a run"}))
    href = compare_url(query, query).replace("&", "&amp;")
    assert f'<a class="pin" href="{href}">Pin as A and compare</a>' in html


@pytest.mark.parametrize("unknown", [1, 12, 40])
@pytest.mark.parametrize("path", ["/compare", "/compare.json", "/compare.csv"])
def test_sides_with_many_unknown_keys_are_refused_not_a_500(client: TestClient, path: str, unknown: int) -> None:
    """Past the error list's cap (10 named, the rest counted) an unknown key is still refused: it never
    reaches code that reads it as a field (a dozen on each side once answered 500)."""
    junk = "&".join(f"junk{i}=1" for i in range(unknown))
    response = client.get(path, params={"a": f"{junk}&dp=16", "b": junk})
    assert response.status_code == 422, response.text[:300]
    assert "junk0" in response.text


# ----------------------------------------------------------------- each edit alone (issue 28, item 4)


def _peak_diff(client: TestClient, a: str, b: str) -> int:
    """B − A of the peak at the stage B runs, from the comparison's own JSON (two whole receipts)."""
    body = client.get(compare_url(a, b, "/compare.json")).json()
    stage = body["b"]["scenario"]["stage"]
    return int(body["b"]["stages"][stage]["peak"]["total"] - body["a"]["stages"][stage]["peak"]["total"])


def test_a_single_edit_alone_is_the_whole_difference(client: TestClient) -> None:
    body = client.get(compare_url("dp=8", "dp=64", "/compare.json")).json()
    (change,) = body["diff"]["inputs"]
    assert change["name"] == "dp" and change["alone_error"] is None
    # stage 3: the persistent state 16 B × (⌈7e9 ÷ 64⌉ − ⌈7e9 ÷ 8⌉) and the all-gather 2 B × (U − ⌈U ÷ D⌉), U = 4e8
    expected = 16 * (7_000_000_000 // 64 - 7_000_000_000 // 8) + 2 * (400_000_000 // 8 - 400_000_000 // 64)
    assert change["peak_alone_bytes"] == body["diff"]["stages"][3]["peak"]["total"] == expected == -12_162_500_000
    page = client.get(compare_url("dp=8", "dp=64")).text
    assert f'data-alone="{expected}"' in page and "alone: peak −12.16 GB / −11.33 GiB" in page


def test_each_edit_alone_is_the_comparison_of_a_with_that_edit(client: TestClient) -> None:
    a = "model=llama-2-7b&dp=8"
    b = "model=llama-2-13b&dp=16&micro_batch=2&act_policy=full"
    inputs = {i["name"]: i for i in client.get(compare_url(a, b, "/compare.json")).json()["diff"]["inputs"]}
    typed = dict(parse_qsl(b))
    for name in ("model", "dp", "micro_batch", "act_policy"):
        one = urlencode({**dict(parse_qsl(a)), name: typed[name]})
        assert inputs[name]["peak_alone_bytes"] == _peak_diff(client, a, one), name
    # what only follows the model (its parameter count, its largest unit) is not an edit of its own
    for name in ("params", "unit_params"):
        assert inputs[name]["peak_alone_bytes"] is None and inputs[name]["alone_error"] is None
    alone = sum(inputs[name]["peak_alone_bytes"] for name in ("model", "dp", "micro_batch", "act_policy"))
    assert alone != _peak_diff(client, a, b)  # the edits interact: the page says so
    assert "The edits alone need not add up" in client.get(compare_url(a, b)).text


def test_an_edit_a_cannot_take_alone_says_why(client: TestClient) -> None:
    """A shard group of 3 divides B's D = 6 but not A's D = 8: alone on A it is refused, naming the field."""
    body = client.get(compare_url("dp=8", "dp=6&shard_group=3", "/compare.json")).json()
    inputs = {i["name"]: i for i in body["diff"]["inputs"]}
    assert inputs["shard_group"]["peak_alone_bytes"] is None
    assert inputs["shard_group"]["alone_error"].startswith("shard_group: ")
    assert isinstance(inputs["dp"]["peak_alone_bytes"], int)
    assert "not valid alone (shard_group: " in client.get(compare_url("dp=8", "dp=6&shard_group=3")).text
    text = client.get(compare_url("dp=8", "dp=6&shard_group=3", "/compare.csv")).text.lstrip("\ufeff")
    rows = list(csv.DictReader(io.StringIO(text)))
    alone = {r["category"]: r for r in rows if r["side"] == "alone"}
    assert int(alone["dp"]["bytes"]) == inputs["dp"]["peak_alone_bytes"]
    assert alone["shard_group"]["bytes"] == "" and alone["shard_group"]["value"] == inputs["shard_group"]["alone_error"]
