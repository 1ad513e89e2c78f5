"""Models on the web: the inventory API, the built-in list, the page's paste form, the model's
sections and the lazily loaded tables."""

from __future__ import annotations

import html
import json
import math
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import markupsafe
from fastapi.testclient import TestClient

from app.ledger.models.known import KNOWN_BY_ID, KNOWN_MODELS
from app.ledger.models.reference import compact
from tests.support.html_numbers import read_cells


def test_model_inventory_lists_every_kind_of_tensor_once_with_its_count(client: TestClient) -> None:
    """Llama-2-7B: the embedding, 32 identical layers as one entry, the final unit; summed with
    their counts the entries give the published 6,738,415,616 parameters."""
    config = dict(KNOWN_BY_ID["llama-2-7b"].config)
    r = client.post("/api/model-inventory", json=config)
    assert r.status_code == 200
    body = r.json()
    assert body["params"] == 6_738_415_616
    assert body["largest_unit"] == {"name": "layers.0", "params": 202_383_360}
    assert [(u["name"], u["count"]) for u in body["units"]] == [("embed", 1), ("layers.{k}", 32), ("final", 1)]
    assert sum(u["params"] * u["count"] for u in body["units"]) == body["params"]
    for unit in body["units"]:
        assert sum(math.prod(t["shape"]) for t in unit["tensors"]) == unit["params"]
    shapes = {t["name"]: t["shape"] for u in body["units"] for t in u["tensors"]}
    assert shapes["model.layers.{k}.mlp.down_proj.weight"] == [4096, 11008]
    assert shapes["lm_head.weight"] == [32000, 4096]
    assert body["tensor_count"] == 1 + 32 * 9 + 2  # the checkpoint's 291 tensors
    assert body["ignored_keys"] == [] and body["ignored_key_count"] == 0
    assert body["model"] == compact(config)
    # the reference reproduces the model as a scenario input
    page = client.get("/", params={"model": body["model"]})
    assert page.status_code == 200


def test_a_mixtral_inventory_lists_its_experts_as_transformers_holds_them(client: TestClient) -> None:
    """Mixtral-8x7B in transformers 5.23.0: every expert's gate and up projections in one [8, 2·14336, 4096] tensor,
    the down projections in one [8, 4096, 14336] (the checkpoint's 24 per-expert tensors are fused on loading)."""
    body = client.post("/api/model-inventory", json=dict(KNOWN_BY_ID["mixtral-8x7b-v0.1"].config)).json()
    layer = body["units"][1]
    experts = {t["name"]: t["shape"] for t in layer["tensors"] if "experts" in t["name"]}
    assert experts == {
        "model.layers.{k}.mlp.experts.gate_up_proj": [8, 28672, 4096],
        "model.layers.{k}.mlp.experts.down_proj": [8, 4096, 14336],
    }
    assert body["params"] == 46_702_792_704
    assert body["tensor_count"] == 3 + 32 * (4 + 1 + 2 + 2)  # 291


DOS_CONFIG = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 32000, "num_experts_per_tok": 2, "num_local_experts": 1024,
    "num_hidden_layers": 1024,
}  # fmt: skip


def test_a_thousand_layers_of_a_thousand_experts_answer_in_a_few_kilobytes(client: TestClient) -> None:
    """The 228-byte request that answered 339,651,958 bytes after 11.5 s (every one of 3,150,850 tensors listed):
    now a layer's nine tensors (the experts fused in two, as transformers holds them), the totals exact."""
    r = client.post("/api/model-inventory", json=DOS_CONFIG)
    assert r.status_code == 200
    assert len(r.content) < 8_000
    body = r.json()
    h, i, e, kv, v = 4096, 14336, 1024, 8 * 128, 32000
    layer = 2 * h * h + 2 * kv * h + e * h + e * 3 * h * i + 2 * h
    assert body["params"] == 1024 * layer + 2 * v * h + h
    assert body["tensor_count"] == 1 + 1024 * (4 + 1 + 2 + 2) + 2
    # the same config as a scenario's model: the page lists one layer's tensors, not 3,072 names
    page = client.get("/", params={"model": body["model"], "seq_len": "1024", "micro_batch": "1"})
    assert page.status_code == 200
    assert "mlp.experts.gate_up_proj [1024 &times; 28672 &times; 4096]" in page.text
    assert len(page.content) < 256 * 1024


GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "intermediate_size": 11008, "vocab_size": 32000}  # fmt: skip


def test_keys_a_family_does_not_read_are_dropped_and_named_not_kept_unchecked(client: TestClient) -> None:
    """These answered 500: the reader never checked the stray key, compaction kept it, and reading
    the link back refused it outside any error handling."""
    for config, stray in (
        ({**GPT2, "hidden_size": -5}, "hidden_size"),
        ({**GPT2, "num_attention_heads": 10**3999}, "num_attention_heads"),
        ({**GPT2, "head_dim": 10**13}, "head_dim"),
        ({**LLAMA, "n_embd": -1}, "n_embd"),
    ):
        r = client.post(
            "/api/model-inventory", content=json.dumps(config), headers={"content-type": "application/json"}
        )
        assert r.status_code == 200, (stray, r.text)
        body = r.json()
        assert body["ignored_keys"] == [stray]
        assert stray + "=" not in body["model"]
        assert client.get("/api/estimate", params={"model": body["model"]}).status_code == 200


def test_a_key_the_family_reads_is_bounded_and_named(client: TestClient) -> None:
    r = client.post("/api/model-inventory", json={**LLAMA, "head_dim": 10**13})
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "head_dim"
    # a link that carries a key its family does not read is refused by name, not with a 500
    bad = client.get("/api/estimate", params={"model": "cfg:model_type=gpt2;hidden_size=5;n_embd=768"})
    assert bad.status_code == 422
    assert "hidden_size" in bad.json()["detail"][0]["msg"]


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


def test_a_paste_the_scenario_cannot_hold_keeps_the_form_and_says_why(client: TestClient) -> None:
    """A valid architecture of 10^15 parameters: the page redirected to "/" and dropped the paste.
    Now the page the paste came from answers, the paste kept and the error beside the form."""
    huge = {
        "model_type": "mixtral", "hidden_size": 131_072, "num_attention_heads": 1_024, "num_key_value_heads": 1,
        "num_hidden_layers": 1_024, "intermediate_size": 1_048_576, "vocab_size": 2**22,
        "num_local_experts": 1_024, "num_experts_per_tok": 1_024,
    }  # fmt: skip
    form = urlencode({"config": json.dumps(huge), "keep": "dp=4"})
    r = client.post("/model", content=form, headers={"content-type": "application/x-www-form-urlencoded"},
                    follow_redirects=False)  # fmt: skip
    assert r.status_code == 422
    assert any(a.startswith("config:") for a in read_cells(r.text).alerts)
    assert str(markupsafe.escape(json.dumps(huge))) in r.text  # the paste is kept, escaped
    assert 'name="dp" value="4"' in r.text  # the scenario it was pasted on


def test_a_paste_with_stray_keys_becomes_a_link_without_them(client: TestClient) -> None:
    form = urlencode({"config": json.dumps({**GPT2, "hidden_size": -5}), "keep": "dp=4"})
    r = client.post("/model", content=form, headers={"content-type": "application/x-www-form-urlencoded"},
                    follow_redirects=False)  # fmt: skip
    assert r.status_code == 303
    model = parse_qs(urlsplit(r.headers["location"]).query)["model"][0]
    assert "hidden_size" not in model and model.startswith("cfg:model_type=gpt2;")
    assert client.get(r.headers["location"]).status_code == 200


def test_the_model_list_groups_the_catalogue_by_family_with_each_count(client: TestClient) -> None:
    """Every built-in model is offered once, under its family's group, with its exact count in billions rounded
    half up (Llama-3.1-405B: 405,853,388,800 → 405.85 B; Llama-3.2-1B: 1,235,814,400 → 1.24 B)."""
    page = client.get("/", params={"model": "llama-3.2-1b"}).text
    select = page[page.index('<select id="f-model"') : page.index("</select>", page.index('<select id="f-model"'))]
    groups = select.split("<optgroup ")[1:]
    offered = [v for g in groups for v in re.findall(r'<option value="([^"]+)"', g)]
    assert sorted(offered) == sorted(KNOWN_BY_ID)
    llama = next(g for g in groups if g.startswith('label="Llama'))
    assert '<option value="llama-3.1-405b">Llama-3.1-405B · 405.85 B parameters</option>' in llama
    assert '<option value="llama-3.2-1b" selected>Llama-3.2-1B · 1.24 B parameters</option>' in llama
    mixtral = next(g for g in groups if g.startswith('label="Mixtral'))
    assert re.findall(r'<option value="([^"]+)"', mixtral) == ["mixtral-8x7b-v0.1", "mixtral-8x22b"]


def _traits(client: TestClient, model: str) -> list[str]:
    page = client.get("/", params={"model": model}).text
    found = re.search(r'<ul class="traits"[^>]*>(.*?)</ul>', page, re.S)
    return [] if found is None else [html.unescape(t) for t in re.findall(r"<li>(.*?)</li>", found.group(1), re.S)]


def test_the_model_section_says_what_each_family_means_for_memory(client: TestClient) -> None:
    """Issue 27 item 4: one line per trait that shapes memory beyond the sizes, drawn from the architecture read."""
    qwen3 = _traits(client, "qwen3-8b")
    assert any(t.startswith("Grouped-query attention: 8 key/value heads for 32 query heads") for t in qwen3)
    assert any(t.startswith("q/k RMSNorm per head") for t in qwen3)
    phi4 = _traits(client, "phi-4")
    assert any(t.startswith("Fused qkv_proj and gate_up_proj") for t in phi4)
    assert any(t.startswith("Norms after the attention") for t in _traits(client, "olmo-2-7b"))
    assert any(t.startswith("Sliding window of 4,096 tokens") for t in _traits(client, "mistral-7b-v0.1"))
    assert any(
        t.startswith("Mixture of experts: 8 experts a layer, 2 per token") for t in _traits(client, "mixtral-8x7b-v0.1")
    )
    assert any(t.startswith("head_dim 128 × 16 heads = 2,048 ≠ hidden 1,024") for t in _traits(client, "qwen3-0.6b"))
    assert _traits(client, "llama-2-7b") == []  # multi-head, untied, no window: nothing beyond its sizes
