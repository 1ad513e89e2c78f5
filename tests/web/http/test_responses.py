"""The response models describe every field the API answers, and /openapi.json documents them.

The receipt is built as plain data by the receipts layer; :mod:`app.receipts.schema` describes
it with models that forbid extra keys, so a field added to the receipt without a description
fails here, and a described field the receipt stops sending fails too (every field is required).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings

from app.ledger.estimate import estimate
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.scenario import Scenario, parse_scenario
from app.receipts.inventory import InventoryOut
from app.receipts.receipt import Receipt, receipt
from app.receipts.sections.checks import KillLists
from tests.support.json_data import as_json_data
from tests.support.strategies import scenarios

MODEL_SCENARIOS = [
    {"model": m.id, "dp": dp, "act_policy": policy} for m in KNOWN_MODELS for dp, policy in ((8, "none"), (64, "full"))
] + [{"model": "gpt2", "activation_bytes": "3GB"}, {"model": "llama-2-7b", "tp": 4, "sequence_parallel": 1}]


def _round_trip(data: dict[str, Any]) -> None:
    """Validated by the model and dumped back, the receipt is unchanged: nothing undocumented,
    nothing documented that is missing, every integer still an integer."""
    model = Receipt.model_validate(data)
    assert model.model_dump(mode="json", by_alias=True) == as_json_data(data)


@settings(max_examples=40)
@given(scenarios())
def test_every_receipt_is_described_by_the_receipt_model(s: Scenario) -> None:
    _round_trip(receipt(estimate(s)))


@pytest.mark.parametrize("raw", MODEL_SCENARIOS, ids=lambda r: "-".join(str(v) for v in r.values()))
def test_model_receipts_are_described_by_the_receipt_model(raw: dict[str, object]) -> None:
    _round_trip(receipt(estimate(parse_scenario(raw))))


def test_an_undocumented_receipt_field_is_refused(seed_estimate: Any) -> None:
    data = receipt(seed_estimate)
    data["stages"][2]["peak"]["surprise"] = 1
    with pytest.raises(ValueError, match="surprise"):
        Receipt.model_validate(data)


def _schema(client: TestClient) -> dict[str, Any]:
    spec: dict[str, Any] = client.get("/openapi.json").json()
    return spec


def test_openapi_documents_the_query_bounds_and_the_receipt(client: TestClient) -> None:
    spec = _schema(client)
    get = spec["paths"]["/api/estimate"]["get"]
    params = {p["name"]: p for p in get["parameters"]}
    assert set(params) >= {"params", "dp", "param_bytes", "capacity_bytes", "model", "name"}
    assert '"maximum": 131072' in str(params["dp"]["schema"]).replace("'", '"')
    ok = get["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/Receipt"}
    receipt_schema = spec["components"]["schemas"]["Receipt"]
    assert {"schema_version", "scenario", "stages", "checkpoint", "mutations"} <= set(receipt_schema["required"])
    stage = spec["components"]["schemas"]["Stage"]["properties"]
    assert {"persistent", "peak", "fits", "headroom_bytes", "communication_bytes", "lines"} <= set(stage)
    peak = spec["components"]["schemas"]["Peak"]["properties"]
    assert all(peak[k]["type"] == "integer" for k in ("persistent", "gather", "buckets", "activations", "total"))
    mutation = spec["components"]["schemas"]["Mutation"]
    assert {"id", "killed", "check", "message"} <= set(mutation["required"])


def test_openapi_documents_schema_2_the_two_peaks(client: TestClient) -> None:
    """Schema 2 (issue 13): the peak in use names its instant and lists every instant; the seed's declared
    peak stays beside it with its own verdict; reduce_bytes, reshard_after_forward and norms are inputs."""
    spec = _schema(client)
    schemas = spec["components"]["schemas"]
    assert schemas["Receipt"]["properties"]["schema_version"]["const"] == 2
    assert {"declared_peak", "peak"} <= set(schemas["Stage"]["required"])
    assert {"kind", "instant", "instant_key", "instants", "note"} <= set(schemas["Peak"]["required"])
    assert {"fits", "headroom_bytes", "peak_minus_declared"} <= set(schemas["DeclaredPeak"]["required"])
    assert {"key", "name", "phase", "total", "parts", "entries"} <= set(schemas["InstantOut"]["required"])
    params = {p["name"] for p in spec["paths"]["/api/estimate"]["get"]["parameters"]}
    assert {"reduce_bytes", "reshard_after_forward", "norms"} <= params
    body = client.get("/api/estimate", params={"model": "llama-2-7b", "dp": 8}).json()
    stage3 = body["stages"][3]
    assert stage3["peak"]["kind"] == "schedule" and stage3["peak"]["instant"]
    assert stage3["declared_peak"]["total"] == stage3["peak"]["total"] - stage3["declared_peak"]["peak_minus_declared"]
    seed = client.get("/api/estimate").json()["stages"][3]
    assert seed["peak"]["kind"] == "declared" and seed["peak"]["instants"] == []
    assert seed["declared_peak"]["total"] == seed["peak"]["total"] == 34_700_000_000


def test_openapi_documents_the_absolute_url_beside_the_link(client: TestClient) -> None:
    receipt_schema = _schema(client)["components"]["schemas"]["Receipt"]
    assert {"link", "url"} <= set(receipt_schema["required"])
    url = receipt_schema["properties"]["url"]
    assert url["type"] == "string"
    assert "absolute URL" in url["description"] and "ZERO3_LAB_PUBLIC_URL" in url["description"]


def test_the_csv_download_is_documented_as_utf8_with_a_bom(client: TestClient) -> None:
    ok = _schema(client)["paths"]["/receipt.csv"]["get"]["responses"]["200"]
    assert "byte order mark" in ok["description"]


@pytest.mark.parametrize(
    ("path", "model"),
    [("/api/mutations", "KillLists"), ("/api/models", "KnownModelOut"), ("/api/model-inventory", "InventoryOut")],
)
def test_every_api_answer_has_a_documented_schema(client: TestClient, path: str, model: str) -> None:
    spec = _schema(client)
    operation = next(iter(spec["paths"][path].values()))
    assert model in str(operation["responses"]["200"]["content"]["application/json"]["schema"])
    assert "422" in operation["responses"] or path == "/api/models"


def test_kill_lists_and_inventory_answers_match_their_models(client: TestClient) -> None:
    KillLists.model_validate(client.get("/api/mutations?dp=1").json())
    config = dict(KNOWN_MODELS[0].config)
    InventoryOut.model_validate(client.post("/api/model-inventory", json=config).json())


@pytest.mark.parametrize("path", ["/", "/receipt.json", "/receipt.csv", "/healthz", "/lines", "/fit-table", "/docs"])
def test_head_answers_like_get(client: TestClient, path: str) -> None:
    get, head = client.get(path + "?dp=16"), client.head(path + "?dp=16")
    assert head.status_code == get.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]


def test_fsdp2_padding_counts_the_models_parameters_when_n_is_declared(client: TestClient) -> None:
    """Llama-2-7B with N declared as 7B: the padding compared the model's padded shard with the
    declared N's bound and came out −523,168,768 bytes; the response model refused it (a 500).
    Now both count the model's 6,738,415,616: ⌈that ÷ 8⌉ = 842,301,952 elements per rank, × 16 B of
    sharded state (2 B parameters + 2 B gradients + 4 B master + 2 × 4 B Adam)."""
    r = client.get("/api/estimate", params={"model": "llama-2-7b", "params": "7B"})
    assert r.status_code == 200
    fsdp2 = r.json()["fsdp2"]
    assert fsdp2["padding_bytes"] >= 0
    assert fsdp2["lower_bound_elements"] == 842_301_952
    assert fsdp2["stage3_lower_bound_bytes"] == 842_301_952 * 16
