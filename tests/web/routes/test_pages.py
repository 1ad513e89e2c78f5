"""The page contract: full page vs htmx fragment, canonical links, inline errors, presets."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from app.ledger.models.known import KNOWN_BY_ID
from app.ledger.scenario.fields import FIELDS
from app.ledger.scenario.links import canonical_query
from app.ledger.scenario.presets import PRESETS
from app.web.http.query import DERIVED
from app.web.views.form import NOTED
from tests.support import paths
from tests.support.html_numbers import read_cells

HX = {"HX-Request": "true"}
SCENARIOS = [
    "",
    "dp=16",
    "params=13B&dp=64&prefetch=2&bucket_bytes=1GiB&contingency_pct=7",
    "params=7&dp=8&unit_params=7&activation_bytes=0",
    "param_bytes=4&master_bytes=0&grad_bytes=4&gather_bytes=2&capacity_bytes=40GiB",
    "params=70B&dp=8&overhead_bytes=3GiB&capacity_bytes=80GiB",
]


def varies_on_hx_request(vary: str) -> bool:
    """The same URL answers a page or a fragment, so caches must key on HX-Request (other names,
    such as Accept-Encoding for compression, may sit beside it)."""
    return "hx-request" in [name.strip().lower() for name in vary.split(",")]


def _check_numbers(html: str, receipt: dict[str, Any], *, need_peak: bool = True) -> None:
    cells = read_cells(html)
    for st in receipt["stages"]:
        for cls, value in st["persistent"].items():
            assert cells.persistent[(st["stage"], cls)] == value, (st["stage"], cls)
        if need_peak:
            for part in ("persistent", "gather", "buckets", "activations", "overhead", "contingency", "total"):
                assert cells.peak[(st["stage"], part)] == st["peak"][part], (st["stage"], part)
            assert cells.peak[(st["stage"], "headroom")] == st["headroom_bytes"]


@pytest.mark.parametrize("query", SCENARIOS)
def test_html_fragment_json_and_csv_agree_on_every_number(client: TestClient, query: str) -> None:
    receipt = client.get(f"/api/estimate?{query}").json()
    _check_numbers(client.get(f"/?{query}").text, receipt)
    _check_numbers(client.get(f"/?{query}", headers=HX).text, receipt)
    assert client.get(f"/receipt.json?{query}").json() == receipt
    rows = list(csv.DictReader(io.StringIO(client.get(f"/receipt.csv?{query}").content.decode("utf-8-sig"))))
    by_key = {(r["stage"], r["ledger"], r["category"]): r["bytes"] for r in rows}
    for st in receipt["stages"]:
        for cls, value in st["persistent"].items():
            assert int(by_key[(str(st["stage"]), "persistent", cls)]) == value
        for part in ("gather", "activations", "total"):
            assert int(by_key[(str(st["stage"]), "peak", part)]) == st["peak"][part]


def test_full_page_has_form_results_and_json_twin(client: TestClient) -> None:
    r = client.get("/?dp=16")
    assert r.status_code == 200
    assert r.text.startswith("<!doctype html>")
    assert '<link rel="alternate" type="application/json" href="/api/estimate?dp=16">' in r.text
    assert 'id="scenario"' in r.text and 'id="results"' in r.text
    assert varies_on_hx_request(r.headers["vary"])


def test_fragment_is_results_plus_out_of_band_error_slots(client: TestClient) -> None:
    r = client.get("/?dp=16", headers=HX)
    assert r.status_code == 200
    assert "<html" not in r.text and 'id="scenario"' not in r.text
    # the page's title first (htmx takes a top-level <title> as the document's), then the section
    assert r.text.lstrip().startswith(
        '<title>zero3-lab &mdash; 7B parameters on 16 ranks</title>\n<section id="results"'
    )
    # one error slot per field (cleared or filled), one hint per derived field, the form's preset
    # and the three paste forms' scenario; the warning slots and the live region keep their element
    assert r.text.count('class="field-error" id="e-') == len(FIELDS)
    assert r.text.count('class="derived" id="d-') == len(DERIVED)
    assert r.text.count('hx-swap-oob="true"') == len(FIELDS) + len(DERIVED) + 4
    assert r.text.count('hx-swap-oob="innerHTML"') == len(NOTED) + 1
    assert varies_on_hx_request(r.headers["vary"])
    assert r.headers["hx-push-url"] == "/?dp=16"


def test_history_restore_gets_the_full_page(client: TestClient) -> None:
    r = client.get("/?dp=16", headers={**HX, "HX-History-Restore-Request": "true"})
    assert r.text.startswith("<!doctype html>")
    assert "hx-push-url" not in r.headers
    assert varies_on_hx_request(r.headers["vary"])


def test_pushed_url_is_canonical_sorted_and_omits_defaults(client: TestClient) -> None:
    r = client.get("/?params=7B&prefetch=1&dp=0016&capacity_bytes=80GB&name=", headers=HX)
    assert r.headers["hx-push-url"] == "/?dp=16&prefetch=1"
    assert client.get("/?params=7B", headers=HX).headers["hx-push-url"] == "/"


def test_page_field_error_is_inline_with_role_alert(client: TestClient) -> None:
    r = client.get("/?dp=0&params=7.5")
    assert r.status_code == 422
    cells = read_cells(r.text)
    assert any(a.startswith("dp:") and "1 … 131,072" in a for a in cells.alerts)
    assert any(a.startswith("params:") for a in cells.alerts)
    assert 'aria-describedby="h-dp e-dp" aria-invalid="true"' in r.text
    assert "Waiting for valid input" in r.text
    assert "Traceback" not in r.text


def test_fragment_errors_answer_200_so_htmx_swaps_them(client: TestClient) -> None:
    r = client.get("/?dp=0", headers=HX)
    assert r.status_code == 200
    cells = read_cells(r.text)
    assert cells.alerts == ["dp: 0 is out of range — allowed: 1 … 131,072"]
    assert r.headers["hx-push-url"] == "/?dp=0"


def test_unit_larger_than_params_is_refused_inline(client: TestClient) -> None:
    r = client.get("/?params=100M&unit_params=400M", headers=HX)
    alerts = read_cells(r.text).alerts
    assert len(alerts) == 1 and alerts[0].startswith("unit_params:") and "100,000,000" in alerts[0]


def test_user_text_is_escaped(client: TestClient) -> None:
    r = client.get("/", params={"name": "<script>alert(1)</script>"})
    assert "<script>alert(1)" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.id)
def test_preset_redirects_to_its_canonical_link_with_its_id(client: TestClient, preset: Any) -> None:
    """The preset's id stays in the address, first, before the scenario's whole canonical query (so
    the link still says what it computes if the preset changes); its title is the heading."""
    query = canonical_query(preset.scenario)
    r = client.get(f"/?preset={preset.id}", follow_redirects=False)
    if query:
        assert r.status_code == 303
        target = r.headers["location"]
        assert target == f"/?preset={preset.id}&{query}"
        r = client.get(target)
    assert r.status_code == 200
    assert f"<h2>{html.escape(preset.title, quote=False)}</h2>" in r.text
    assert f"<title>zero3-lab &mdash; {html.escape(preset.title, quote=False)}</title>" in r.text
    assert f'<option value="{preset.id}" selected>' in r.text
    assert f'id="scenario-preset" name="preset" value="{preset.id}">' in r.text
    receipt = client.get("/api/estimate" + (f"?{query}" if query else "")).json()
    assert receipt["scenario"] == preset.scenario.as_dict()
    # the live update on the same scenario keeps the id; any change drops it
    fragment = client.get(f"/?preset={preset.id}&{query}", headers=HX)
    assert fragment.headers["hx-push-url"] == f"/?preset={preset.id}" + (f"&{query}" if query else "")
    assert f"<title>zero3-lab &mdash; {html.escape(preset.title, quote=False)}</title>" in fragment.text
    changed = client.get(f"/?preset={preset.id}&{query}&dp=3", headers=HX)
    assert "preset=" not in changed.headers["hx-push-url"]
    assert 'id="scenario-preset" name="preset" value="" disabled hx-swap-oob="true">' in changed.text


def test_preset_under_htmx_redirects_the_whole_page(client: TestClient) -> None:
    r = client.get("/?preset=seed-fsdp2", headers=HX, follow_redirects=False)
    assert r.status_code == 204
    assert r.headers["hx-redirect"].startswith("/?")


def test_unknown_preset_goes_home(client: TestClient) -> None:
    r = client.get("/?preset=nope", follow_redirects=False)
    assert r.headers["location"] == "/"


def test_docs_are_served_without_a_cdn(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text
    assert 'data-openapi="/openapi.json"' in docs.text
    assert "http" not in docs.text.replace("http-equiv", "")
    assert client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js").status_code == 200


def test_openapi_documents_the_query_bounds(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    params = {p["name"]: p["schema"] for p in spec["paths"]["/api/estimate"]["get"]["parameters"]}
    # An optional query parameter: the value's schema, or null (absent) for its default.
    dp = next(branch for branch in params["dp"]["anyOf"] if branch["type"] == "integer")
    assert dp == {"type": "integer", "minimum": 1, "maximum": 131_072}
    widths = next(branch for branch in params["param_bytes"]["anyOf"] if branch["type"] == "integer")
    assert widths["enum"] == [1, 2, 4]


def test_page_loads_only_same_origin_assets(client: TestClient) -> None:
    text = client.get("/").text
    assert "https://" not in text and "http://" not in text
    for asset in ("/static/app.css", "/static/app.js", "/static/vendor/htmx.min.js"):
        assert asset in text
        assert client.get(asset).status_code == 200


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_security_headers_on_every_response(client: TestClient) -> None:
    for path in ("/", "/api/estimate", "/receipt.csv", "/nope", "/static/app.css", "/healthz"):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        script_src = next(part for part in csp.split(";") if part.strip().startswith("script-src"))
        assert "unsafe-inline" not in script_src
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"


@pytest.mark.parametrize("query", ["", "model=llama-2-7b&act_policy=full", "dp=0"])
def test_every_id_on_the_page_is_unique(client: TestClient, query: str) -> None:
    """A regression test: a section heading once shared the id of a field's help text."""
    import re

    ids = re.findall(r'\sid="([^"]+)"', client.get(f"/?{query}").text)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_pages_are_utf8_and_show_the_lab_s_symbols_as_text(client: TestClient) -> None:
    """The lab's own ⌈ ÷ × travel as UTF-8 characters, escaped like any other text."""
    for path in ("/?dp=16", "/lines?dp=16"):
        r = client.get(path)
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        assert '<meta charset="utf-8">' in r.text
    lines = client.get("/lines?dp=16", headers=HX)
    assert lines.headers["content-type"] == "text/html; charset=utf-8"
    assert "⌈7,000,000,000 ÷ 16⌉ = 437,500,000" in lines.text


PENDING_KILLS = re.compile(r'<section aria-labelledby="h-kill"[^>]*\bdata-pending\b.*?</section>\n', re.DOTALL)
PENDING_LOWER = re.compile(r'<div id="lower" class="lower" data-pending\b.*?</div>\n', re.DOTALL)
PENDING_RUN_CHANGE = re.compile(r'<p class="run-change" id="run-change" data-pending\b.*?</p>\n', re.DOTALL)


def _with_deferred_loaded(client: TestClient, section: str) -> str:
    """``section`` with its deferred parts (the sections below the peak, the kill lists) replaced by
    what they ask for (``/lower``, ``/kills``), as htmx swaps them in when they come into view."""
    for pattern in (PENDING_RUN_CHANGE, PENDING_LOWER, PENDING_KILLS):
        pending = pattern.search(section)
        if pending is None:
            continue
        found = re.search(r'hx-get="([^"]+)"', pending.group())
        assert found is not None
        answer = client.get(html.unescape(found.group(1)), headers=HX)
        assert answer.status_code == 200
        section = section.replace(pending.group(), answer.text)
    return section


@pytest.mark.parametrize("query", [*SCENARIOS, "model=llama-2-7b&act_policy=full", "dp=0&params=x", "name=%3Cb%3E"])
def test_the_fragment_is_the_very_results_section_the_page_includes(client: TestClient, query: str) -> None:
    """One file, partials/_results.html, is both included by the page and returned for htmx: the
    fragment's section appears verbatim in the page, so the two cannot drift. A live update defers
    the sections below the peak to ``/lower`` and the kill lists to ``/kills`` (each loaded
    when it comes into view): with those answers swapped in, as htmx does, the fragment is the page's
    section byte for byte."""
    fragment = client.get(f"/?{query}", headers=HX).text
    start = fragment.index('<section id="results"')
    section = fragment[start : fragment.index('</section>\n<div class="field-error"') + len("</section>\n")]
    page = client.get(f"/?{query}").text
    valid = 'class="summary' in section
    assert valid == (PENDING_KILLS.search(section) is not None) == (PENDING_LOWER.search(section) is not None)
    assert _with_deferred_loaded(client, section) in page


@pytest.mark.parametrize("query", ["", "model=llama-2-7b&dp=64", "dp=1&activation_bytes=0"])
def test_a_live_update_defers_the_fit_finder_and_the_kill_lists_unless_presenting(
    client: TestClient, query: str
) -> None:
    """The fragment asks /lower and /kills (for its own scenario's address) for the sections below the peak
    and for its kill lists once they come into view; the page (no JavaScript, a first load, a
    history restore) and presenter mode's live update (the stepper shows them) have them."""
    r = client.get(f"/?{query}", headers=HX)
    address = r.headers.get("hx-push-url") or r.headers["hx-replace-url"]
    # and the run's smallest change, when it does not fit (the fit finder is searched then; see test_run.py)
    run_pending = r.text.count('id="run-change" data-pending')
    assert r.text.count("data-pending") - run_pending == 2 and '<table class="kills"' not in r.text
    for absent in ('id="h-host"', 'class="fit-chart"', 'id="h-ckpt"', 'id="h-trace"'):
        assert absent not in r.text
    for path in ("/lower", "/kills"):
        assert f'hx-get="{path}{html.escape(address[1:])}" hx-trigger="intersect once"' in r.text
    restore = {"HX-History-Restore-Request": "true", **HX}
    for headers, path in (({}, f"/?{query}"), (HX, f"/?{query}&present=1"), (restore, f"/?{query}")):
        got = client.get(path, headers=headers).text
        assert got.count('<table class="kills"') == 2 and "data-pending" not in got, (path, headers)
        assert '<div id="lower" class="lower">' in got and 'id="h-host"' in got and 'class="fit-chart"' in got


IN_VIEW = [
    ("lower", {"lower"}),
    ("kills", {"kills"}),
    ("lower kills", {"lower", "kills"}),
    ("", set()),
    ("results <script> " + "x" * 500, set()),
]


@pytest.mark.parametrize(("in_view", "inline"), IN_VIEW)
def test_a_live_update_brings_inline_what_is_on_screen(client: TestClient, in_view: str, inline: set[str]) -> None:
    """The page says which deferrable parts are on screen (X-In-View): those come inline in the live update,
    the others stay deferred; anything else in the header is ignored. Caches are told the answer varies by it."""
    r = client.get("/?model=llama-2-7b&dp=64", headers={**HX, "X-In-View": in_view})
    assert r.status_code == 200 and "X-In-View" in r.headers["vary"]
    assert ('<div id="lower" class="lower">' in r.text) == ("lower" in inline)
    assert ('class="fit-chart"' in r.text) == ("lower" in inline)
    assert (r.text.count('<table class="kills"') == 2) == ("kills" in inline)
    assert r.text.count("data-pending") == 2 - len(inline)


def test_the_kill_lists_on_their_own(client: TestClient) -> None:
    """/kills: the section for htmx, a page of its own without JavaScript, a 422 naming a bad field."""
    section = client.get("/kills?dp=16", headers=HX)
    assert section.status_code == 200 and section.text.startswith('<section aria-labelledby="h-kill"')
    assert "survived: dp = 1" not in section.text and section.text.count('<tr data-mutant="') == 18  # 9 mutants, twice
    page = client.get("/kills?dp=16")
    assert page.text.startswith("<!doctype html>") and section.text in page.text
    assert "Mutation kill list: " in page.text and 'href="/?dp=16"' in page.text  # the way back
    survived = client.get("/kills?dp=1", headers=HX).text
    assert "survived: dp = 1" in survived  # the list is the scenario's own, not the page's last one
    bad = client.get("/kills?dp=0", headers=HX)
    assert bad.status_code == 422 and "dp" in bad.text


def test_the_fit_finder_on_its_own(client: TestClient) -> None:
    """/lower: the sections below the peak for htmx, a page of their own without JavaScript,
    a 422 naming a bad field. The figures are the scenario's own (the fit chart marks its D)."""
    section = client.get("/lower?dp=16", headers=HX)
    assert section.status_code == 200 and section.text.startswith('<div id="lower" class="lower">')
    for heading in ("h-trace", "h-fit", "h-comm", "h-ckpt", "h-host", "h-run"):
        assert f'id="{heading}"' in section.text
    assert "D = 16</text>" in section.text
    page = client.get("/lower?dp=16")
    assert page.text.startswith("<!doctype html>") and section.text in page.text
    assert "Trace, fit finder, communication, checkpoint and host: " in page.text and 'href="/?dp=16"' in page.text
    assert "D = 1</text>" in client.get("/lower?dp=1", headers=HX).text
    bad = client.get("/lower?dp=0", headers=HX)
    assert bad.status_code == 422 and "dp" in bad.text


@pytest.mark.parametrize("name", ["/lines", "/fit-table"])
def test_a_detail_table_is_the_same_partial_inline_and_on_its_own_page(client: TestClient, name: str) -> None:
    table = client.get(f"{name}?dp=16", headers=HX).text
    assert table.startswith('<div class="scroll"')
    page = client.get(f"{name}?dp=16").text
    assert page.startswith("<!doctype html>")
    assert table in page


@pytest.mark.parametrize(
    "path", ["/", "/?dp=16", "/?dp=0", "/lines?dp=16", "/fit-table", "/kills?dp=16", "/docs", "/?preset=nope"]
)
def test_head_answers_like_get(client: TestClient, path: str) -> None:
    for headers in ({}, HX):
        got = client.get(path, headers=headers, follow_redirects=False)
        head = client.head(path, headers=headers, follow_redirects=False)
        assert head.status_code == got.status_code, (path, headers)
        assert head.content == b""
        for name in ("content-type", "vary", "hx-push-url", "location", "content-length"):
            assert head.headers.get(name) == got.headers.get(name), (path, name)


def test_every_page_and_download_route_answers_head(client: TestClient) -> None:
    """HEAD answers as GET does on every path outside /api/ that answers GET (a route added with
    ``router.get`` alone would answer HEAD with 405), here without a query: a page, or its 422."""
    from app.web.app import ROUTERS

    methods: dict[str, set[str]] = {}
    for router in ROUTERS:
        for route in router.routes:
            methods.setdefault(route.path, set()).update(getattr(route, "methods", None) or ())  # type: ignore[attr-defined]
    paths = sorted(path for path, m in methods.items() if "GET" in m and not path.startswith("/api/"))
    assert {"/", "/receipt.csv", "/compare", "/reconcile", "/trace", "/trace.json"} <= set(paths)
    for path in paths:
        got, head = client.get(path, follow_redirects=False), client.head(path, follow_redirects=False)
        assert head.status_code == got.status_code != 405, path
        assert head.content == b""


def test_static_assets_are_linked_with_a_content_version(client: TestClient) -> None:
    import hashlib
    import re

    static = paths.ROOT / "static"
    page, docs = client.get("/").text, client.get("/docs").text
    for text, asset in (
        (page, "app.css"), (page, "app.js"), (page, "vendor/htmx.min.js"),
        (docs, "vendor/swagger-ui/swagger-ui.css"), (docs, "vendor/swagger-ui/swagger-ui-bundle.js"), (docs, "docs.js"),
    ):  # fmt: skip
        version = hashlib.sha256((static / asset).read_bytes()).hexdigest()[:10]
        url = f"/static/{asset}?v={version}"
        assert re.search(f'(src|href)="{re.escape(url)}"', text), asset
        assert client.get(url).status_code == 200


def test_a_paste_refused_keeps_the_paste_escaped_and_says_why(client: TestClient) -> None:
    paste = "</textarea><script>alert(1)</script>"
    r = client.post(
        "/model",
        content=urlencode({"config": paste, "keep": "dp=4&name=<b>x</b>"}),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 422
    assert "<script>alert" not in r.text and "<b>x" not in r.text
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;</textarea>" in r.text
    alerts = read_cells(r.text).alerts
    assert len(alerts) == 1 and alerts[0].startswith("config: not valid JSON")
    assert '<details class="paste" open>' in r.text


def test_typed_unicode_is_kept_and_escaped(client: TestClient) -> None:
    r = client.get("/", params={"name": "Größe <b>×</b>"})
    assert "Größe &lt;b&gt;×&lt;/b&gt;" in r.text


# Issue 14: the answer first, presets as state, history, errors in view, unit sanity.


def test_the_answer_bar_names_every_stage_the_device_and_d(client: TestClient) -> None:
    text = client.get("/?capacity_bytes=80GiB&dp=1").text
    assert "<h2>7B parameters on 1 rank</h2>" in text
    assert "<title>zero3-lab &mdash; 7B parameters on 1 rank</title>" in text
    receipt = client.get("/api/estimate?capacity_bytes=80GiB&dp=1").json()
    for st in receipt["stages"]:
        words = "fits" if st["fits"] else "does not fit"
        assert f"<strong>Stage {st['stage']}: {words}</strong>" in text
        assert f'data-peak="{st["peak"]["total"]}"' in text
        assert f'data-headroom="{st["headroom_bytes"]}"' in text
    assert "on D = 1 rank of NVIDIA A100 80GB (85.90 GB / 80.00 GiB)" in text
    h100 = client.get("/?capacity_bytes=81559MiB&dp=1").text
    assert "on D = 1 rank of NVIDIA H100 SXM5 80GB (85.52 GB / 79.65 GiB)" in h100
    # a capacity no listed device has is described, not named
    assert "of a device of 40.00 GB / 37.25 GiB" in client.get("/?capacity_bytes=40GB").text


def test_only_the_verdict_is_a_live_region(client: TestClient) -> None:
    page = client.get("/?dp=16").text
    assert 'id="results" class="results" aria-label="Ledger" tabindex="-1">' in page  # no aria-live
    assert (
        '<div id="announce" class="visually-hidden" role="status" aria-live="polite" aria-atomic="true"></div>' in page
    )
    fragment = client.get("/?dp=16", headers=HX).text
    assert '<div id="announce" hx-swap-oob="innerHTML">Your run, stage 3 on 16 ranks: ' in fragment
    invalid = client.get("/?dp=0", headers=HX).text
    assert (
        '<div id="announce" hx-swap-oob="innerHTML">Waiting for valid input: 1 field needs attention.</div>' in invalid
    )


def test_typing_replaces_the_history_entry_and_a_settled_change_pushes(client: TestClient) -> None:
    here = {"HX-Current-URL": "http://testserver/?dp=1"}
    settled = client.get("/?dp=16", headers={**HX, **here})
    assert settled.headers["hx-push-url"] == "/?dp=16" and "hx-replace-url" not in settled.headers
    typing = client.get("/?dp=16", headers={**HX, **here, "X-History": "replace"})
    assert typing.headers["hx-replace-url"] == "/?dp=16" and "hx-push-url" not in typing.headers
    # a settled change to the address the page is already at adds no entry (a blur after typing)
    same = client.get("/?dp=16", headers={**HX, "HX-Current-URL": "http://testserver/?dp=16"})
    assert same.headers["hx-replace-url"] == "/?dp=16" and "hx-push-url" not in same.headers
    assert "x-history" in settled.headers["vary"].lower()


def test_load_with_no_preset_chosen_is_refused_by_the_form(client: TestClient) -> None:
    text = client.get("/?dp=16").text
    assert '<select id="preset" name="preset" required>' in text
    assert "data-autosubmit" not in text  # the menu does not load on `change` (arrow keys)
    # an empty preset beside a scenario is ignored, not a reset
    r = client.get("/?preset=&dp=16", follow_redirects=False)
    assert r.status_code == 200 and 'name="dp" value="16"' in r.text


def test_the_paste_form_under_htmx_answers_in_place(client: TestClient) -> None:
    form = {"content-type": "application/x-www-form-urlencoded"}
    bad = client.post("/model", content=urlencode({"config": "{", "keep": "dp=4"}), headers={**form, **HX})
    assert bad.status_code == 200  # htmx 2 swaps only 2xx
    assert bad.text.lstrip().startswith('<details class="paste" open>')
    assert 'aria-invalid="true" autofocus>' in bad.text
    assert any(a.startswith("config: not valid JSON") for a in read_cells(bad.text).alerts)
    assert 'id="keep" name="keep" value="dp=4"' in bad.text
    good = client.post(
        "/model",
        content=urlencode({"config": json.dumps(dict(KNOWN_BY_ID["gpt2"].config)), "keep": "dp=4"}),
        headers={**form, **HX},
        follow_redirects=False,
    )
    assert good.status_code == 204
    assert good.headers["hx-redirect"].startswith("/?dp=4&model=cfg")


@pytest.mark.parametrize(
    ("query", "slot", "text"),
    [
        ("capacity_bytes=80", "capacity_bytes", "80 means 80 bytes — did you mean 80GB or 80GiB?"),
        ("capacity_bytes=512MiB", "capacity_bytes", "512MiB is only 536,870,912 bytes (0.54 GB), under 1 GB"),
        ("seq_len=4k", "seq_len", "4,000 tokens — did you mean 4Ki = 4,096?"),
        ("seq_len=1M", "seq_len", "1,000,000 tokens — did you mean 1Mi = 1,048,576?"),
        ("capacity_bytes=80GiB", "capacity_bytes", "= 80.00 GiB = 85.90 GB: what the NVIDIA A100 80GB reports"),
        ("capacity_bytes=80GB", "capacity_bytes", "the seed article's decimal 80 GB, not a device"),
        ("overhead_bytes=0", "overhead_bytes", "Not declared: 0 B counted."),
    ],
)
def test_implausible_values_warn_beside_their_field(client: TestClient, query: str, slot: str, text: str) -> None:
    page = client.get(f"/?{query}")
    assert page.status_code == 200  # valid: a warning, not an error
    assert read_cells(page.text).alerts == []
    assert text in html.unescape(page.text)
    assert f'aria-describedby="h-{slot} e-{slot} w-{slot}"' in page.text
    fragment = client.get(f"/?{query}", headers=HX).text
    start = fragment.index(f'<div class="field-note" id="w-{slot}" role="status" hx-swap-oob="innerHTML">')
    assert text in html.unescape(fragment[start : fragment.index("</div>", start)])


def test_no_warning_on_plausible_values_and_the_default_sequence_length_reads_4_096(client: TestClient) -> None:
    text = client.get("/?seq_len=8192&capacity_bytes=96GB").text
    assert 'id="f-seq_len" name="seq_len" value="8,192"' in text
    assert '<div class="field-note" id="w-seq_len" role="status"></div>' in text
    assert '<div class="field-note" id="w-capacity_bytes" role="status"></div>' in text
    assert 'id="f-seq_len" name="seq_len" value="4,096"' in client.get("/").text
    # while another field is invalid, a field's own warning still shows
    assert "80 means 80 bytes" in html.unescape(client.get("/?capacity_bytes=80&dp=0").text)


def test_the_devices_say_what_an_80gb_h100_reports(client: TestClient) -> None:
    text = html.unescape(client.get("/").text)
    assert "An H100 SXM5 80GB has 80 GiB of HBM3 and reports 81,559 MiB" in text
    assert '<option value="81559MiB">NVIDIA H100 SXM5 80GB (80GB HBM3) reports 79.65 GiB = 85.52 GB</option>' in text


def test_the_form_opens_with_the_stack_and_the_hardware(client: TestClient) -> None:
    legends = re.findall(r"<legend>([^<]+)</legend>", client.get("/").text)
    assert legends[:3] == ["Stack and hardware", "Model", "Stack choices"]


def test_the_verdict_says_when_no_runtime_overhead_is_declared(client: TestClient) -> None:
    assert '<p class="hint" id="run-overhead">Runtime overhead not declared' in client.get("/").text
    assert 'id="run-overhead"' not in client.get("/?overhead_bytes=600MiB").text
