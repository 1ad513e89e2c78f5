"""Models on the web: the inventory API, the built-in list, the page's paste form, the model's
sections and the lazily loaded tables."""

from __future__ import annotations

import html
import json
import math
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi.testclient import TestClient

from app.ledger.models.known import KNOWN_BY_ID, KNOWN_MODELS
from app.ledger.models.reference import compact
from tests.web.html_numbers import read_cells


def test_model_inventory_lists_every_tensor_and_unit(client: TestClient) -> None:
    config = dict(KNOWN_BY_ID["llama-2-7b"].config)
    r = client.post("/api/model-inventory", json=config)
    assert r.status_code == 200
    body = r.json()
    assert body["params"] == 6_738_415_616
    assert body["largest_unit"] == {"name": "layers.0", "params": 202_383_360}
    assert len(body["units"]) == 32 + 2
    assert sum(u["params"] for u in body["units"]) == body["params"]
    shapes = {t["name"]: t["shape"] for t in body["tensors"]}
    assert shapes["model.layers.31.mlp.down_proj.weight"] == [4096, 11008]
    assert shapes["lm_head.weight"] == [32000, 4096]
    assert sum(math.prod(t["shape"]) for t in body["tensors"]) == body["params"]
    assert body["model"] == compact(config)
    # the reference reproduces the model as a scenario input
    page = client.get("/", params={"model": body["model"]})
    assert page.status_code == 200


def test_model_inventory_errors_name_the_key_and_list_families(client: TestClient) -> None:
    r = client.post("/api/model-inventory", json={"model_type": "bert", "hidden_size": 768})
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", "model_type"]
    assert "llama" in detail["msg"]
    assert "gpt_neox" in detail["msg"]
    missing = client.post("/api/model-inventory", json={"model_type": "llama", "hidden_size": 4096})
    assert missing.status_code == 422
    assert "num_attention_heads" in missing.json()["detail"][0]["msg"]
    assert client.post("/api/model-inventory", content=b"[1]").status_code == 422


def test_models_list_has_ids_titles_sources_and_counts(client: TestClient) -> None:
    body = client.get("/api/models").json()
    assert [m["id"] for m in body] == [m.id for m in KNOWN_MODELS]
    assert all(m["source"] and m["params"] > 0 for m in body)


def test_pasting_a_config_keeps_the_other_inputs(client: TestClient) -> None:
    config = json.dumps(dict(KNOWN_BY_ID["mistral-7b-v0.1"].config))
    form = urlencode({"config": config, "keep": "dp=64&params=9B&capacity_bytes=40GiB"})
    r = client.post("/model", content=form, headers={"content-type": "application/x-www-form-urlencoded"},
                    follow_redirects=False)  # fmt: skip
    assert r.status_code == 303
    query = parse_qs(urlsplit(r.headers["location"]).query)
    assert query["dp"] == ["64"]
    assert query["capacity_bytes"] == [str(40 * 2**30)]
    assert "params" not in query  # the new model supplies params
    assert query["model"][0].startswith("cfg:model_type=mistral")


def test_a_bad_pasted_config_is_shown_inline(client: TestClient) -> None:
    form = urlencode({"config": '{"model_type": "t5"}', "keep": "dp=4"})
    r = client.post("/model", content=form, headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 422
    alerts = read_cells(r.text).alerts
    assert any(a.startswith("config:") and "supported families" in a for a in alerts)
    assert "&#34;t5&#34;" in r.text or "&quot;t5&quot;" in r.text  # the pasted text is kept, escaped
    bad_json = client.post("/model", content=urlencode({"config": "{"}),
                           headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert bad_json.status_code == 422
    assert any("not valid JSON" in a for a in read_cells(bad_json.text).alerts)


def test_the_page_shows_the_model_the_activation_ledger_and_the_fit_finder(client: TestClient) -> None:
    text = client.get("/", params={"model": "qwen2-0.5b", "act_policy": "selective"}).text
    assert "Model: Qwen2-0.5B" in text
    assert "494,032,768" in text
    assert "embed" in text
    assert "FSDP2 exact stage-3 shard" in text
    assert "modelled" in text
    assert 'data-fit="smallest_dp"' in text
    assert "The chart's numbers: peak per stage at each D" in text


def test_derived_fields_are_empty_with_a_hint(client: TestClient) -> None:
    text = client.get("/", params={"model": "llama-2-7b"}).text
    assert 'id="f-params" name="params" value=""' in text
    assert "empty = from config: 6,738,415,616" in text
    fragment = client.get("/", params={"model": "llama-2-7b", "params": ""}, headers={"HX-Request": "true"})
    assert fragment.headers["hx-push-url"] == "/?model=llama-2-7b"  # empty derived field = its default
    assert 'id="d-params" hx-swap-oob="true">empty = from config: 6,738,415,616' in fragment.text


def test_lazy_tables_answer_for_the_same_scenario(client: TestClient) -> None:
    htmx = {"HX-Request": "true"}
    lines = client.get("/lines", params={"dp": "16"}, headers=htmx)
    assert lines.status_code == 200
    assert not lines.text.startswith("<!doctype")  # the table alone, for the <details> to take in
    assert "⌈7,000,000,000 ÷ 16⌉ = 437,500,000" in html.unescape(lines.text)
    fit = client.get("/fit-table", params={"dp": "16"}, headers=htmx)
    assert fit.status_code == 200
    assert fit.text.count('<tr><th scope="row">') == 18  # D = 1, 2, 4, … 131,072
    # Followed as a plain link (no JavaScript), each is a page of its own with a way back.
    page = client.get("/lines", params={"dp": "16"})
    assert page.text.startswith("<!doctype html>")
    assert '<a href="/?dp=16">' in page.text
    assert page.text.count("<tr><td>") == 16
    assert client.get("/lines", params={"dp": "0"}).status_code == 422
