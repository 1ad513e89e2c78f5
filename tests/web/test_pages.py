"""The page contract: full page vs htmx fragment, canonical links, inline errors, presets."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from app.ledger.fields import FIELDS
from app.ledger.presets import PRESETS
from app.web.query import DERIVED
from tests.web.html_numbers import read_cells

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
    rows = list(csv.DictReader(io.StringIO(client.get(f"/receipt.csv?{query}").text)))
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
    assert r.text.lstrip().startswith('<section id="results"')
    # one error slot per field (cleared or filled), one hint per derived field, and the paste form's scenario
    assert r.text.count('class="field-error" id="e-') == len(FIELDS)
    assert r.text.count('class="derived" id="d-') == len(DERIVED)
    assert r.text.count('hx-swap-oob="true"') == len(FIELDS) + len(DERIVED) + 1
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
def test_preset_redirects_to_its_canonical_link(client: TestClient, preset: Any) -> None:
    r = client.get(f"/?preset={preset.id}", follow_redirects=False)
    assert r.status_code == 303
    target = r.headers["location"]
    page = client.get(target)
    assert page.status_code == 200
    receipt = client.get("/api/estimate" + target[1:]).json()
    assert receipt["scenario"] == preset.scenario.as_dict()


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


@pytest.mark.parametrize("query", [*SCENARIOS, "model=llama-2-7b&act_policy=full", "dp=0&params=x", "name=%3Cb%3E"])
def test_the_fragment_is_the_very_results_section_the_page_includes(client: TestClient, query: str) -> None:
    """One file, partials/_results.html, is both included by the page and returned for htmx: the
    fragment's section appears verbatim in the page, so the two cannot drift."""
    fragment = client.get(f"/?{query}", headers=HX).text
    section = fragment[: fragment.index('</section>\n<div class="field-error"') + len("</section>\n")]
    assert section.startswith('<section id="results"')
    assert section in client.get(f"/?{query}").text


@pytest.mark.parametrize("name", ["/lines", "/fit-table"])
def test_a_detail_table_is_the_same_partial_inline_and_on_its_own_page(client: TestClient, name: str) -> None:
    table = client.get(f"{name}?dp=16", headers=HX).text
    assert table.startswith('<div class="scroll">')
    page = client.get(f"{name}?dp=16").text
    assert page.startswith("<!doctype html>")
    assert table in page


@pytest.mark.parametrize("path", ["/", "/?dp=16", "/?dp=0", "/lines?dp=16", "/fit-table", "/docs", "/?preset=nope"])
def test_head_answers_like_get(client: TestClient, path: str) -> None:
    for headers in ({}, HX):
        got = client.get(path, headers=headers, follow_redirects=False)
        head = client.head(path, headers=headers, follow_redirects=False)
        assert head.status_code == got.status_code, (path, headers)
        assert head.content == b""
        for name in ("content-type", "vary", "hx-push-url", "location", "content-length"):
            assert head.headers.get(name) == got.headers.get(name), (path, name)


def test_static_assets_are_linked_with_a_content_version(client: TestClient) -> None:
    import hashlib
    import re
    from pathlib import Path

    static = Path(__file__).resolve().parents[2] / "static"
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
