"""Pasting a config.json never changes what the user set (issue 28, item 2): every input of every form group that
differs from its default stays as it was; what the pasted model supplies, the old run's name and any input the new
model cannot take move, and each is named in a notice in view on the page the paste lands on."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.ledger.models.known import KNOWN_BY_ID
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.fields import FIELD_BY_NAME
from app.ledger.scenario.links import canonical_query
from tests.support.html_numbers import read_cells

# One input set away from its default in each of the form's groups, on Llama-2-7B: a run a user describes.
SET_BY_THE_USER: dict[str, dict[str, str]] = {
    "stack": {"stack": "hf-fsdp2"},
    "precision": {"param_bytes": "4", "grad_bytes": "4", "master_bytes": "0", "gather_bytes": "2", "reduce_bytes": "2"},
    "parallelism": {"dp": "16", "shard_group": "8"},
    "schedule": {"prefetch": "2", "bucket_bytes": "1GB"},
    "measured": {"overhead_bytes": "2GiB", "contingency_pct": "5"},
    "activation": {"seq_len": "2048", "micro_batch": "2", "act_policy": "full", "tp": "2"},
    "device": {"capacity_bytes": "96GiB"},
    "host": {"ranks_per_node": "4"},
}


def _paste(client: TestClient, keep: str, model: str) -> tuple[dict[str, str], list[str]]:
    """The landing scenario's query and the inputs named as moved, after pasting ``model``'s config.json."""
    form = urlencode({"config": json.dumps(dict(KNOWN_BY_ID[model].config)), "keep": keep})
    r = client.post("/model", content=form, headers={"content-type": "application/x-www-form-urlencoded"},
                    follow_redirects=False)  # fmt: skip
    assert r.status_code == 303
    query = dict(parse_qsl(urlsplit(r.headers["location"]).query))
    return query, [m for m in query.pop("moved", "").split(",") if m]


@pytest.mark.parametrize("group", sorted(SET_BY_THE_USER))
def test_a_paste_keeps_what_the_user_set_in_each_group(client: TestClient, group: str) -> None:
    raw = {"model": "llama-2-7b", **SET_BY_THE_USER[group]}
    keep = canonical_query(parse_scenario(raw))
    before = dict(parse_qsl(keep))
    assert set(SET_BY_THE_USER[group]) <= before.keys()  # each is away from its default, so the form carries it
    after, moved = _paste(client, keep, "mistral-7b-v0.1")
    assert moved == []
    assert {k: v for k, v in after.items() if k != "model"} == {k: v for k, v in before.items() if k != "model"}
    assert after["model"].startswith("cfg:model_type=mistral")


def test_every_group_at_once_and_what_the_model_supplies_is_named(client: TestClient) -> None:
    raw = {"model": "llama-2-7b", "name": "our 7B run", "activation_bytes": "30GB"}
    for fields in SET_BY_THE_USER.values():
        raw.update(fields)
    before = dict(parse_qsl(canonical_query(parse_scenario(raw))))
    after, moved = _paste(client, urlencode(before), "mistral-7b-v0.1")
    assert moved == ["activation_bytes", "name"]  # the measured figure was the old model's; the name named it
    assert {k: v for k, v in after.items() if k != "model"} == {
        k: v for k, v in before.items() if k not in ("model", "name", "activation_bytes")
    }


def test_an_input_the_new_model_cannot_take_moves_and_the_page_says_so(client: TestClient) -> None:
    """GPT-2 has 12 heads and 1,024 learned positions: tp = 8 and s = 2,048 cannot stay; D and the rest do."""
    raw = {"model": "llama-2-7b", "tp": "8", "seq_len": "2048", "dp": "32", "param_bytes": "4", "gather_bytes": "2"}
    after, moved = _paste(client, canonical_query(parse_scenario(raw)), "gpt2")
    assert moved == ["seq_len", "tp"] or moved == ["tp", "seq_len"]
    assert (after["dp"], after["param_bytes"], after["gather_bytes"]) == ("32", "4", "2")
    assert "tp" not in after and "seq_len" not in after  # their defaults
    landing = client.get("/", params={**after, "moved": ",".join(moved)})
    assert landing.status_code == 200
    notice = next(a for a in read_cells(landing.text).alerts if a.startswith("Pasting the config.json moved"))
    for name in moved:
        assert FIELD_BY_NAME[name].label in notice
    assert "does not suit the pasted model" in notice
    # the first edit (a live update) answers without it: the notice is about the paste, not the scenario
    update = client.get("/", params={**after, "dp": "64"}, headers={"HX-Request": "true"})
    assert 'id="moved-inputs"' not in update.text


def test_the_moved_parameter_names_only_fields(client: TestClient) -> None:
    page = client.get("/", params={"moved": "tp,<script>,nonsense," + "x" * 500})
    assert page.status_code == 200
    alerts = read_cells(page.text).alerts
    assert any(a.startswith("Pasting the config.json moved") and FIELD_BY_NAME["tp"].label in a for a in alerts)
    assert "<script>" not in page.text.split('id="moved-inputs"', 1)[1].split("</div>", 1)[0]
