"""The JSON receipt: its names, its stages, checkpoint and kill lists, the parallelism key."""

from __future__ import annotations

import csv
import io
import json

from app.ledger.estimate import Estimate, estimate
from app.ledger.scenario import Scenario, parse_scenario
from app.receipts.csv_rows import (
    csv_text,
)
from app.receipts.receipt import SCHEMA_VERSION, Receipt, receipt, receipt_out
from app.receipts.table import render_table
from tests.support.json_data import as_json_data

SCHEDULE_MUTANTS = ("drop-reduce-scatter-buffer", "keep-all-grads-at-activation-peak")


def read_csv(e: Estimate) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(csv_text(e), newline="")))


# --------------------------------------------------------------------------- JSON


def test_json_receipt_top_level_names(seed_estimate: Estimate) -> None:
    data = receipt(seed_estimate)
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert {"schema_version", "scenario", "stages", "checkpoint", "mutations"} <= set(data)
    assert data["scenario"] == {
        "stack": "plain-fsdp2",
        "loss": "outside",
        "wrap": "root",
        "buffers": "none",
        "reserve_bytes": 0,
        "reserve_source": "declared",
        "ac_every": 1,
        "optimizer_impl": "for-loop",
        "gqa": "native",
        "loss_chunks": 8,
        "params": 7_000_000_000,
        "dp": 8,
        "param_bytes": 2,
        "grad_bytes": 2,
        "master_bytes": 4,
        "opt_states": 2,
        "opt_bytes": 4,
        "unit_params": 400_000_000,
        "gather_bytes": 2,
        "prefetch": 0,
        "stage": 3,
        "bucket_bytes": 0,
        "activation_bytes": 20_000_000_000,
        "overhead_bytes": 0,
        "contingency_pct": 0,
        "capacity_bytes": 80_000_000_000,
        "name": "",
        "model": "",
        "seq_len": 4096,
        "micro_batch": 1,
        "act_bytes": 2,
        "act_policy": "none",
        "tp": 1,
        "sequence_parallel": 0,
        "logits_bytes": 4,
        "reduce_bytes": 2,
        "reshard_after_forward": 1,
        "norms": "unfused",
        "offload_optimizer": "none",
        "offload_param": "none",
        "ranks_per_node": 8,
        "host_bytes": 2_000_000_000_000,
        "load_path": "partitioned",
        "shard_group": 8,
        "hpz": 1,
        "pp": 1,
        "pp_stage": "first",
        "ep": 1,
        "routing_imbalance_pct": 100,
        "grad_accum": 1,
        "grad_sync": "every",
        "reshard_after_backward": 1,
        "save_path": "sharded",
        "trainable_params": 7_000_000_000,
        "frozen_bytes": 2,
        "lora_rank": 0,
        "lora_targets": "",
        "base_quant": "none",
        "frozen_layers": 0,
        "freeze_embed": 0,
        "cp": 1,
        "frozen_modules": "",
    }


def test_json_receipt_stages(seed_estimate: Estimate) -> None:
    stages = receipt(seed_estimate)["stages"]
    assert [s["stage"] for s in stages] == [0, 1, 2, 3]
    for s in stages:
        assert {"persistent", "peak", "fits", "headroom_bytes", "communication_bytes", "lines"} <= set(s)
        assert set(s["persistent"]) >= {"parameters", "gradients", "master_weights", "optimizer_states", "total"}
        assert set(s["peak"]) >= {"persistent", "gather", "buckets", "activations", "overhead", "contingency", "total"}
        assert len(s["lines"]) == 4
        for ln in s["lines"]:
            assert {"width", "copies", "owners", "elements", "bytes", "formula", "evidence"} <= set(ln)
    # the worked example through the receipt: 112 / 38.5 / 26.25 / 14 GB, 0.7 GB gather at stage 3
    assert [s["persistent"]["total"] for s in stages] == [112 * 10**9, 38_500_000_000, 26_250_000_000, 14 * 10**9]
    assert stages[3]["peak"]["gather"] == 700_000_000
    assert [s["fits"] for s in stages] == [False, True, True, True]
    assert stages[0]["headroom_bytes"] == -52 * 10**9
    assert stages[0]["communication_bytes"] == 24_500_000_000


def test_json_receipt_checkpoint_and_mutations(seed_estimate: Estimate) -> None:
    data = receipt(seed_estimate)
    assert list(data["checkpoint"]) == ["sharded", "full_params", "full_state"]
    for policy in data["checkpoint"].values():
        assert {"device_bytes", "host_bytes"} <= set(policy)
    assert data["checkpoint"]["full_state"]["host_bytes"] == 98 * 10**9
    assert data["checkpoint"]["full_state"]["flagged"] is True
    assert len(data["mutations"]) == 9
    for m in data["mutations"]:
        assert {"id", "killed", "check", "message"} <= set(m)
        assert isinstance(m["killed"], bool)
        # the seed has no model: the two schedule mutants survive, equivalent there
        assert m["killed"] is (m["id"] not in SCHEDULE_MUTANTS)
        assert bool(m["check"]) is m["killed"]
    assert [m["id"] for m in data["mutations"]] == [
        "replicate-optimizer-stage1",
        "shard-params-stage2",
        "omit-master-copy",
        "divide-activations-by-dp",
        "erase-gather-peak",
        *SCHEDULE_MUTANTS,
        "flatten-shard-groups",
        "forget-pinned-buffers",
    ]
    assert all(m["killed"] for m in data["reference_mutations"])


def test_json_receipt_survivor(seed: Scenario) -> None:
    data = receipt(estimate(seed.with_(dp=1)))
    survivor = next(m for m in data["mutations"] if m["id"] == "shard-params-stage2")
    assert survivor["killed"] is False
    assert survivor["check"] == ""
    assert "dp = 1" in survivor["message"]
    assert all(m["killed"] for m in data["reference_mutations"])


def test_json_receipt_is_json(seed_estimate: Estimate) -> None:
    data = receipt(seed_estimate)
    assert json.loads(json.dumps(data)) == as_json_data(data)


# --------------------------------------------------------------------------- parallelism


def test_the_parallelism_key_of_a_plain_scenario(seed_estimate: Estimate) -> None:
    assert receipt(seed_estimate)["parallelism"] == {
        "world": 8, "dp": 8, "tp": 1, "pp": 1, "ep": 1, "cp": 1, "shard_group": 8, "replicas": 1, "hpz": 1,
        "params_per_rank": 7_000_000_000, "expert_params_per_rank": 0,
        "share": None, "activations": None, "pipeline": None,
    }  # fmt: skip
    assert "Parallelism" not in render_table(seed_estimate)


def test_the_parallelism_key_of_llama_2_70b_on_128_gpus() -> None:
    """tp 8 × pp 4 × dp 4 = 128 GPUs. Each rank of the first stage holds 80 ÷ 4 = 20 decoder layers' tensor-parallel
    shares and the embedding's vocabulary share: one layer's 8,192·8,192 (q) + 2 · 1,024·8,192 (k, v; 8 key-value
    heads of 128) + 8,192·8,192 (o) + 3 · 28,672·8,192 (MLP) split 8 ways, plus both norms' 2 · 8,192 whole."""
    layer = (8192 * 8192 + 2 * 1024 * 8192 + 8192 * 8192 + 3 * 28672 * 8192) // 8 + 2 * 8192
    embed = 32000 * 8192 // 8
    assert layer == 106_971_136 and embed == 32_768_000
    e = estimate(parse_scenario({"model": "llama-2-70b", "tp": 8, "pp": 4, "dp": 4}), with_kill_lists=False)
    data = receipt(e)
    par = data["parallelism"]
    assert (par["world"], par["dp"], par["tp"], par["pp"], par["ep"]) == (128, 4, 8, 4, 1)
    assert par["params_per_rank"] == 20 * layer + embed == 2_172_190_720 == data["scenario"]["params"]
    assert par["expert_params_per_rank"] == 0
    share = par["share"]
    assert (share["stage"], share["layers"], share["dense"], share["experts"]) == ("first", 20, 2_172_190_720, 0)
    assert share["largest_unit"] == {"name": "layers.0", "params": layer}
    assert share["whole_model"] == 68_976_648_192
    assert share["lines"][-1].endswith("= 2,172,190,720 parameters per rank")
    assert par["activations"] == {"stage": "first", "in_flight": 4, "all_to_all_bytes": 0, "ring_kv_bytes": 0}
    pipe = par["pipeline"]
    assert (pipe["budgeted"], pipe["busier"], pipe["budgeted_is_busier"], pipe["other_problem"]) == (
        "first", "first", True, "")  # fmt: skip
    first, last = pipe["ends"]
    assert first["pp_stage"] == "first" and last["pp_stage"] == "last"
    # the first end is the scenario's own ledger at the run's stage
    assert first["peak"] == data["stages"][3]["peak"]["total"]
    assert first["activation_bytes"] == e.scenario.activation_bytes
    # the last end: 20 layers, the final norm 8,192 and the LM head's share 32,000 · 8,192 ÷ 8 (untied)
    assert last["params"] == 20 * layer + 8192 + embed == 2_172_198_912
    assert first["peak"] > last["peak"]
    Receipt.model_validate(data)
    table = read_csv(e)
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in table}
    assert cell[("", "parallelism", "world")]["value"] == "128"
    assert cell[("", "parallelism", "world")]["formula"] == "4 × 8 × 4 × 1 = 128"
    assert cell[("", "parallelism", "params_per_rank")]["value"] == "2172190720"
    assert cell[("3", "parallelism", "pipeline.first.peak")]["bytes"] == str(first["peak"])
    assert cell[("3", "parallelism", "pipeline.last.peak")]["bytes"] == str(last["peak"])
    text = render_table(e)
    assert "world size = D × tp × pp × cp = 4 × 8 × 4 × 1 = 128 GPUs" in text
    assert "first (budgeted, busier)" in text and "WARNING" not in text


def test_the_parallelism_key_of_mixtral_with_expert_parallelism() -> None:
    """ep 4 on D = 8: each rank holds 2 of every layer's 8 experts, 32 × 2 × 3 · 14,336·4,096 = 11,274,289,152
    expert parameters (sharded over D ÷ ep = 2), beside 1,605,636,096 dense ones (sharded over D)."""
    experts = 32 * 2 * 3 * 14336 * 4096
    assert experts == 11_274_289_152
    e = estimate(parse_scenario({"model": "mixtral-8x7b-v0.1", "ep": 4, "dp": 8}), with_kill_lists=False)
    data = receipt(e)
    par = data["parallelism"]
    assert (par["world"], par["ep"], par["pipeline"]) == (8, 4, None)
    assert par["expert_params_per_rank"] == experts
    assert par["share"]["dense"] == 1_605_636_096
    assert par["share"]["experts"] == experts
    assert par["params_per_rank"] == 1_605_636_096 + experts
    assert par["activations"]["stage"] == "only" and par["activations"]["all_to_all_bytes"] > 0
    Receipt.model_validate(data)
    cell = {(r["stage"], r["ledger"], r["category"]): r for r in read_csv(e)}
    assert cell[("", "parallelism", "expert_params_per_rank")]["value"] == str(experts)
    assert not any(r["category"].startswith("pipeline.") for r in read_csv(e) if r["ledger"] == "parallelism")
    assert "of which 11,274,289,152 expert, sharded over D ÷ ep = 2" in render_table(e)


def test_the_json_receipt_is_its_model_dumped(seed_estimate: Estimate) -> None:
    """One description: the data the download and the CLI write is the model's dump, its scenario section
    in the scenario's own order (the schema lists five inputs last; /api/estimate answers in its order)."""
    model = receipt_out(seed_estimate)
    data = receipt(seed_estimate)
    assert json.loads(model.model_dump_json(by_alias=True)) == data
    assert Receipt.model_validate(data) == model
    assert list(data["scenario"]) == list(seed_estimate.scenario.as_dict())
