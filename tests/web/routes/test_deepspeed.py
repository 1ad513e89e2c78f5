"""DeepSpeed configs in the API and the page, and the snippets out: the same core as the CLI."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from tests.support import paths

DS = paths.DATA / "deepspeed"
FORM = {"content-type": "application/x-www-form-urlencoded"}


def config(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DS / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


# --------------------------------------------------------------------------- the API


def test_api_reads_a_config_into_a_canonical_link(client: TestClient) -> None:
    """LLaVA's ZeRO-3 config beside Llama-2-13B: reduce_bucket_size "auto" = 5,120² elements × 2 B."""
    answer = client.post("/api/deepspeed", json={"config": config("llava-zero3"), "scenario": {"model": "llama-2-13b"}})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["link"] == "/?bucket_bytes=52428800&model=llama-2-13b"
    assert data["scenario"]["bucket_bytes"] == 52_428_800 and data["scenario"]["stage"] == 3
    by_key = {line["key"]: line for line in data["lines"]}
    assert by_key["zero_optimization.reduce_bucket_size"]["status"] == "sets"
    assert "26,214,400 elements × 2 B" in by_key["zero_optimization.reduce_bucket_size"]["effect"]
    assert data["deepspeed"].startswith("DeepSpeed ")
    # the link is an ordinary scenario: the page and the receipt read it
    receipt = client.get("/api/estimate" + data["link"][1:]).json()
    assert receipt["scenario"] == data["scenario"]


def test_api_scenario_fields_win_over_the_config(client: TestClient) -> None:
    body = {"config": config("deepspeed-chat-step1-zero3"), "scenario": {"model": "llama-2-7b", "micro_batch": 2}}
    data = client.post("/api/deepspeed", json=body).json()
    assert data["scenario"]["micro_batch"] == 2


def test_api_refused_key_is_a_422_at_its_path(client: TestClient) -> None:
    answer = client.post("/api/deepspeed", json={"config": config("hf-docs-zero3-nvme")})
    assert answer.status_code == 422
    (detail,) = answer.json()["detail"]
    assert detail["loc"] == ["body", "config", "zero_optimization", "aio"]
    assert "top-level section" in detail["msg"]


@pytest.mark.parametrize(
    ("body", "field"),
    [({"config": {}, "scenario": {"dp": 0}}, "dp"), ({"config": [1]}, "config"), ({"config": {}, "extra": 1}, "extra")],
)
def test_api_bad_body_names_the_field(client: TestClient, body: dict[str, Any], field: str) -> None:
    answer = client.post("/api/deepspeed", json=body)
    assert answer.status_code == 422
    assert field in json.dumps(answer.json()["detail"])


def test_snippets_api_and_downloads_agree(client: TestClient) -> None:
    query = "?model=llama-2-7b&stage=2&bucket_bytes=400MB&dp=16"
    api = client.get("/api/snippets" + query)
    assert api.status_code == 200
    data = api.json()
    download = client.get("/ds_config.json" + query)
    assert download.status_code == 200
    assert download.headers["content-disposition"].startswith("attachment;")
    assert json.loads(download.text) == data["deepspeed"]["config"]
    assert data["deepspeed"]["config"]["zero_optimization"]["reduce_bucket_size"] == 100_000_000
    script = client.get("/fsdp2.py" + query)
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/x-python")
    assert script.text == data["fsdp2"]["text"]
    assert client.head("/ds_config.json" + query).status_code == 200
    assert client.get("/ds_config.json?dp=0").status_code == 422


# --------------------------------------------------------------------------- the page


def test_the_page_reads_a_pasted_config_and_links_the_scenario(client: TestClient) -> None:
    """Pasted on a Llama-2-13B scenario with micro batch 8: the config's keys replace the page's fields
    (DeepSpeed-Chat's micro batch 4), the model stays and reads the "auto" sizes."""
    form = {
        "ds_config": (DS / "deepspeed-chat-step1-zero3.json").read_text(),
        "keep": "micro_batch=8&model=llama-2-13b",
    }
    answer = client.post("/deepspeed", content=urlencode(form), headers={**FORM, "HX-Request": "true"})
    assert answer.status_code == 200
    html = answer.text
    assert html.startswith('<details class="ds-paste" id="deepspeed" open>')
    assert 'href="/?bucket_bytes=1000000000&amp;micro_batch=4&amp;model=llama-2-13b"' in html
    assert "zero_optimization.stage3_max_live_parameters" in html
    assert "over-count" in html
    assert 'role="alert"' not in html


def test_the_page_refuses_a_bad_config_inline(client: TestClient) -> None:
    bad = '{"fp16": {"enabled": true}, "bf16": {"enabled": true}, "<b>": 1}'
    form = {"ds_config": bad, "keep": "model=llama-2-7b"}
    answer = client.post("/deepspeed", content=urlencode(form), headers=FORM)
    assert answer.status_code == 422
    text = answer.text
    assert '<span role="alert">ds_config: bf16.enabled: fp16 and bf16 cannot both be enabled' in text
    assert 'aria-invalid="true" autofocus' in text
    assert "&#34;&lt;b&gt;&#34;: 1" in text  # the paste comes back, escaped
    for junk in ("not json", "[1]"):
        answer = client.post(
            "/deepspeed", content=urlencode({"ds_config": junk}), headers={**FORM, "HX-Request": "true"}
        )
        assert answer.status_code == 200 and 'role="alert"' in answer.text


def test_run_it_section_loads_the_snippets_when_opened(client: TestClient) -> None:
    page = client.get("/?model=llama-2-7b&stage=2").text
    assert 'hx-get="/snippets?model=llama-2-7b&amp;stage=2"' in page
    assert 'data-run="yes"' in page and "(the stage you run)" in page
    part = client.get("/snippets?model=llama-2-7b&stage=2", headers={"HX-Request": "true"}).text
    assert part.startswith('<div class="snippets">')
    assert "reshard_after_forward=False" in part  # stage 2 in FSDP2's words
    assert 'href="/ds_config.json?model=llama-2-7b&amp;stage=2"' in part
    alone = client.get("/snippets?model=llama-2-7b&stage=2")
    assert alone.status_code == 200 and "back to the scenario" in alone.text


def test_the_page_shows_the_host_ledger_and_the_cheapest_offload(client: TestClient) -> None:
    """Llama-2-7B with the optimizer offloaded to the CPU: stage 3's host RAM is 8 ranks × 18 B × ⌈N ÷ 8⌉ =
    121,291,481,088 B per node. Llama-2-13B on 4 × 24 GB with full recomputation: stage 3 fits only with the
    optimizer offloaded, and the node holds the run's 4 ranks' host state."""
    page = client.get("/?model=llama-2-7b&offload_optimizer=cpu").text
    assert 'id="h-host"' in page and 'data-bytes="121291481088"' in page
    assert (
        "DeepSpeed prints <code>  150.62GB |   2.06GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu"
        in page
    )
    query = "model=llama-2-13b&dp=4&capacity_bytes=24GB&act_policy=full"
    small = client.get("/lower?" + query, headers={"HX-Request": "true"}).text  # as a live update loads it
    assert "Cheapest offload on which stage 3 fits at D = 4: optimizer to cpu" in small
    receipt = client.get("/api/estimate?" + query).json()
    assert receipt["fit"]["cheapest_offload"]["offload_optimizer"] == "cpu"
    assert receipt["host"]["stages"][3]["lines"] == []  # the scenario itself offloads nothing
