"""The page contract: full page vs htmx fragment, canonical links, inline errors, presets."""

from __future__ import annotations

import csv
import io
from typing import Any

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
    assert r.headers["vary"] == "HX-Request"


def test_fragment_is_results_plus_out_of_band_error_slots(client: TestClient) -> None:
    r = client.get("/?dp=16", headers=HX)
    assert r.status_code == 200
    assert "<html" not in r.text and 'id="scenario"' not in r.text
    assert r.text.lstrip().startswith('<section id="results"')
    # one error slot per field (cleared or filled), one hint per derived field, and the paste form's scenario
    assert r.text.count('class="field-error" id="e-') == len(FIELDS)
    assert r.text.count('class="derived" id="d-') == len(DERIVED)
    assert r.text.count('hx-swap-oob="true"') == len(FIELDS) + len(DERIVED) + 1
    assert r.headers["vary"] == "HX-Request"
    assert r.headers["hx-push-url"] == "/?dp=16"


def test_history_restore_gets_the_full_page(client: TestClient) -> None:
    r = client.get("/?dp=16", headers={**HX, "HX-History-Restore-Request": "true"})
    assert r.text.startswith("<!doctype html>")
    assert "hx-push-url" not in r.headers
    assert r.headers["vary"] == "HX-Request"


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


def test_docs_and_openapi_are_served_without_a_cdn(client: TestClient) -> None:
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs.text
    assert "http" not in docs.text.replace("http-equiv", "")
    assert client.get("/static/vendor/swagger-ui/swagger-ui-bundle.js").status_code == 200
    spec = client.get("/openapi.json").json()
    params = {p["name"]: p["schema"] for p in spec["paths"]["/api/estimate"]["get"]["parameters"]}
    assert params["dp"] == {"type": "integer", "minimum": 1, "maximum": 131_072}
    assert params["param_bytes"] == {"type": "integer", "enum": [1, 2, 4]}


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


@pytest.mark.parametrize("query", [*SCENARIOS, "model=llama-2-7b&act_policy=full", "dp=0&params=x", "dp=1"])
def test_pages_are_ascii_for_ascii_input(client: TestClient, query: str) -> None:
    """The lab's own ⌈ ÷ × ≥ … travel as character references: an ASCII page is built and encoded
    several times faster (docs/performance.md), and reads the same in the browser."""
    for headers in ({}, HX):
        body = client.get(f"/?{query}", headers=headers).content
        assert body.isascii(), [chr(b) for b in body if b > 127][:5]
    for path in ("/lines", "/fit-table"):
        for headers in ({}, HX):
            assert client.get(f"{path}?{query}", headers=headers).content.isascii()


def test_typed_unicode_is_kept_and_escaped(client: TestClient) -> None:
    r = client.get("/", params={"name": "Größe <b>×</b>"})
    assert "Größe &lt;b&gt;×&lt;/b&gt;" in r.text
