"""The model-parallel layout on the page, in the JSON receipt and in the CSV: tp, pp, ep, cp, HSDP and hpZ."""

from __future__ import annotations

import csv
import html
import io
import re
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.receipts.receipt import Receipt

LLAMA_70B = "model=llama-2-70b&tp=8&pp=4&dp=4"
# GPT-2 on two pipeline stages under full recomputation (found by computing both ends): the last stage's
# logits and head activations outweigh the first stage's two micro batches of checkpointed layers, so the
# budgeted first end is not the busier one.
GPT2_LAST_BUSIER = "act_policy=full&model=gpt2&pp=2"
SECTION = re.compile(r'<section aria-labelledby="h-parallel".*?</section>', re.S)


def section(client: TestClient, query: str, **headers: str) -> str | None:
    answer = client.get(f"/?{query}", headers=headers)
    assert answer.status_code == 200, answer.text
    found = SECTION.search(answer.text)
    return None if found is None else found.group(0)


def ends(text: str) -> dict[str, str]:
    """Each pipeline end's table row, by its end."""
    return dict(re.findall(r'<tr data-end="(first|last)".*?>(.*?)</tr>', text, re.S))


def test_the_page_shows_the_world_size_the_share_and_both_ends(client: TestClient) -> None:
    text = section(client, LLAMA_70B)
    assert text is not None
    assert "Parallelism: 128 GPUs" in text
    assert "4 &times; 8 &times; 4 &times; 1 = <strong>128 GPUs</strong>" in text
    assert "<strong>2,172,190,720</strong>" in text  # parameters per rank before ZeRO shards them
    assert "20 layers × 106,971,136 + embed 32,768,000 = 2,172,190,720 parameters per rank" in text
    rows = ends(text)
    assert set(rows) == {"first", "last"}
    assert "(budgeted)" in rows["first"] and "(busier)" in rows["first"]
    assert "2,172,198,912" in rows["last"]  # the last end: the final norm and the LM head's share instead
    assert 'data-bytes="62985625600"' in rows["first"] and 'data-bytes="22583123968"' in rows["last"]
    assert "GB" in rows["first"] and "GiB" in rows["first"]  # units labelled
    assert 'role="alert"' not in text  # the budgeted end is the busier


def test_a_live_update_carries_the_section_too(client: TestClient) -> None:
    text = section(client, LLAMA_70B, **{"HX-Request": "true"})
    assert text is not None and "Parallelism: 128 GPUs" in text


def test_the_page_alerts_when_the_other_end_is_busier_and_links_to_it(client: TestClient) -> None:
    text = section(client, GPT2_LAST_BUSIER)
    assert text is not None
    rows = ends(text)
    assert "(budgeted)" in rows["first"] and "(busier)" in rows["last"]
    alert = re.search(r'<p class="notice bad" role="alert">(.*?)</p>', text, re.S)
    assert alert is not None
    assert "The last stage is busier than the first stage" in alert.group(1)
    href = re.search(r'<a class="switch-end" href="([^"]+)"', alert.group(1))
    assert href is not None
    target = html.unescape(href.group(1))
    assert dict(parse_qsl(urlsplit(target).query)) == {
        "act_policy": "full",
        "model": "gpt2",
        "pp": "2",
        "pp_stage": "last",
    }
    # the linked scenario budgets the busier end: no alert there
    switched = section(client, urlsplit(target).query)
    assert switched is not None and 'role="alert"' not in switched
    assert "(budgeted)" in ends(switched)["last"] and "(busier)" in ends(switched)["last"]


@pytest.mark.parametrize("query", ["", "model=llama-2-7b", "dp=16&params=13000000000"])
def test_a_plain_scenario_has_no_section(client: TestClient, query: str) -> None:
    assert section(client, query) is None


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("dp=16&hpz=8", "ZeRO++ hpZ: a secondary parameter partition over 8 ranks"),
        ("dp=16&shard_group=8", "state sharded over 8 ranks, replicated 2 times"),
        ("model=mixtral-8x7b-v0.1&ep=4&dp=8", "11,274,289,152 expert parameters sharded over D &divide; ep = 2 ranks"),
    ],
)
def test_other_layouts_show_the_section(client: TestClient, query: str, shown: str) -> None:
    text = section(client, query)
    assert text is not None and shown in text
    assert "<table" not in text  # no pipeline, no ends table


def test_the_receipts_carry_the_parallelism_key_and_rows(client: TestClient) -> None:
    data = client.get(f"/receipt.json?{LLAMA_70B}").json()
    par = data["parallelism"]
    assert (par["world"], par["params_per_rank"], par["pipeline"]["busier"]) == (128, 2_172_190_720, "first")
    assert [end["pp_stage"] for end in par["pipeline"]["ends"]] == ["first", "last"]
    Receipt.model_validate(data)
    assert client.get(f"/api/estimate?{LLAMA_70B}").json()["parallelism"] == par
    text = client.get(f"/receipt.csv?{LLAMA_70B}").content.decode("utf-8-sig")
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in csv.DictReader(io.StringIO(text, newline=""))}
    assert cell[("", "parallelism", "world")]["value"] == "128"
    assert cell[("", "parallelism", "params_per_rank")]["value"] == "2172190720"
    assert cell[("", "parallelism", "expert_params_per_rank")]["value"] == "0"
    for end in par["pipeline"]["ends"]:
        assert cell[("3", "parallelism", f"pipeline.{end['pp_stage']}.peak")]["bytes"] == str(end["peak"])


def test_a_plain_receipt_has_a_null_pipeline(client: TestClient) -> None:
    par = client.get("/receipt.json").json()["parallelism"]
    assert (par["world"], par["share"], par["activations"], par["pipeline"]) == (8, None, None, None)


def test_openapi_documents_the_parallelism_section(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "parallelism" in schemas["Receipt"]["required"]
    section_schema = schemas["ParallelismSection"]["properties"]
    assert {"world", "replicas", "params_per_rank", "expert_params_per_rank", "share", "pipeline"} <= set(
        section_schema
    )
    assert schemas["PipelineEndOut"]["properties"]["peak"]["type"] == "integer"


LLAMA_8B_CP = "model=llama-3.1-8b&seq_len=8192&cp=4&dp=2"


def test_context_parallelism_is_shown_on_the_page_and_in_the_receipts(client: TestClient) -> None:
    """D × tp × pp × cp = 2 × 1 × 1 × 4 = 8 GPUs; state over D × cp = 8 ranks; the ring's K and V of s ÷ cp = 2,048
    tokens: (4 + 1) × 2 × 2,048 × 8 × 128 × 2 B = 41,943,040 B."""
    text = section(client, LLAMA_8B_CP)
    assert text is not None
    assert "2 &times; 1 &times; 1 &times; 4 = <strong>8 GPUs</strong>" in text
    assert "Context parallelism cp = 4" in text and "(41,943,040 B)" in text
    par = client.get(f"/receipt.json?{LLAMA_8B_CP}").json()["parallelism"]
    assert (par["world"], par["cp"], par["activations"]["ring_kv_bytes"]) == (8, 4, 41_943_040)
    rows = csv.DictReader(io.StringIO(client.get(f"/receipt.csv?{LLAMA_8B_CP}").content.decode("utf-8-sig")))
    world = next(r for r in rows if (r["ledger"], r["category"]) == ("parallelism", "world"))
    assert (world["value"], world["formula"]) == ("8", "2 × 1 × 1 × 4 = 8")


def test_a_cp_the_sequence_cannot_take_is_an_inline_alert_naming_cp(client: TestClient) -> None:
    answer = client.get("/?cp=3")
    assert answer.status_code == 422
    said = re.search(r'<span role="alert">(cp: 3: 2 × cp = 6 does not divide seq_len \(4,096\).*?)</span>', answer.text)
    assert said is not None
