"""Context parallelism (issue 33 item 3), worked by hand: the world, state sharded over D × cp, the activations of the
local sequence plus ring attention's K/V, the communication over D × cp and the ring's traffic, the bounds."""

from __future__ import annotations

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.models.activations import ActivationInputError, activation_ledger
from app.ledger.models.defaults import model_defaults
from app.ledger.models.reference import resolve
from app.ledger.peak.fit import find_fit
from app.ledger.peak.schedule.instants import Instant
from app.ledger.peak.schedule.layout import not_schedulable
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario
from app.ledger.state.communication import communication
from app.ledger.state.parallel_traffic import context_parallel, model_parallel_traffic
from app.ledger.verify.oracle import stage_table


def _errors(raw: dict[str, object]) -> dict[str, str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(raw)
    return {e.field: e.message for e in caught.value.errors}


def test_the_world_is_d_times_tp_times_pp_times_cp() -> None:
    """torchtitan 0.3.0 ParallelDims: dp_replicate × dp_shard × cp × tp × pp = WORLD_SIZE; 8 × 2 × 1 × 4 = 64."""
    s = parse_scenario({"dp": 8, "tp": 2, "cp": 4, "model": "llama-3.1-8b", "seq_len": 8192})
    assert s.world == 64


def test_state_is_sharded_over_d_times_cp() -> None:
    """The seed's 7B at D = 8, cp = 2: FSDP shards over the dp_shard_cp mesh of 16 ranks. Stage 3: parameters
    ⌈7,000,000,000 ÷ 16⌉ × 2 = 437,500,000 × 2 = 875,000,000 B; gradients the same; master 437,500,000 × 4 =
    1,750,000,000 B; Adam 437,500,000 × 2 × 4 = 3,500,000,000 B; total 7,000,000,000 B (half of cp = 1's 14 GB)."""
    s = parse_scenario({"cp": 2})
    stage3 = {line.tensor_class: line.bytes for line in compute_ledger(s).stages[3].lines}
    assert stage3 == {"parameters": 875_000_000, "gradients": 875_000_000, "master_weights": 1_750_000_000,
                      "optimizer_states": 3_500_000_000}  # fmt: skip
    assert all(line.owners == 16 for line in compute_ledger(s).stages[3].lines)


def test_the_oracle_takes_cp_itself_and_agrees() -> None:
    """The oracle's own table at cp = 2 (its group (D or the shard group) × cp) equals the ledger's, cell by cell, and
    with cp = 1 it does not: the check would catch a ledger that forgot cp. HSDP: groups of 4, cp 2, owners 8."""
    for raw in ({"cp": 2}, {"cp": 4, "shard_group": 4, "dp": 16, "stage": 2}):
        s = parse_scenario(raw)
        ledger = compute_ledger(s)
        table = stage_table(s.params, s.dp, s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes,
                            shard_group=s.shard_group, cp=s.cp)  # fmt: skip
        without = stage_table(s.params, s.dp, s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes,
                              shard_group=s.shard_group)  # fmt: skip
        for stage in ledger.stages:
            got = {line.tensor_class: line.bytes for line in stage.lines}
            assert got == table[stage.stage]
        assert table[3] != without[3]
    checks = {c.check: c for c in estimate(parse_scenario({"cp": 2})).checks}
    assert checks["oracle-agreement"].passed and checks["host-agreement"].passed


def test_activations_are_the_local_sequence_s_plus_the_ring_s_k_and_v() -> None:
    """Llama-3.1-8B (kv 8 heads × d 128), s = 8,192, cp = 4, b = 1, bf16: every figure is that of s ÷ cp = 2,048 tokens,
    plus ring K/V = (cp + 1) · 2 · 2,048 · 1 · 8 · 128 · 2 B = 5 · 8,388,608 = 41,943,040 B."""
    arch = resolve("llama-3.1-8b").architecture
    local = activation_ledger(arch, seq_len=2048, micro_batch=1)
    split = activation_ledger(arch, seq_len=8192, micro_batch=1, cp=4)
    assert split.ring_kv_bytes == 41_943_040
    assert split.per_layer_bytes == local.per_layer_bytes and split.logits_bytes == local.logits_bytes
    assert split.total_bytes == local.total_bytes + 41_943_040
    assert "ring K/V" in split.formula.text
    # tp = 2 splits the 8 K/V heads: 4 per rank, the ring's buffers halve
    assert activation_ledger(arch, seq_len=8192, micro_batch=1, cp=4, tp=2).ring_kv_bytes == 41_943_040 // 2


def test_the_scenario_models_the_local_activations() -> None:
    """A named model's modelled activation peak follows cp: the scenario's own choices (stack, norms, …) at s ÷ cp
    tokens plus the ring's 41,943,040 B; and the schedule is walked."""
    s = parse_scenario({"model": "llama-3.1-8b", "seq_len": 8192, "cp": 4})
    local = model_defaults(s.model_query()._replace(seq_len=2048, cp=1)).activations.total_bytes
    assert s.activation_bytes == local + 41_943_040
    assert not_schedulable(s) is None
    with_chunks = s.with_(stack="torchtitan", loss="chunked")
    why = not_schedulable(with_chunks)
    assert why is not None and why.startswith("context parallelism with the chunked loss")


def _instants(s: Scenario) -> dict[str, Instant]:
    schedule = estimate(s, with_kill_lists=False).ledger.stages[3].peak.schedule
    assert schedule is not None
    return {i.key: i for i in schedule.instants}


def test_the_walk_at_cp_holds_the_local_sequence_and_shards_over_d_times_cp() -> None:
    """torchtitan's Llama 3.1 8B, s 32,768, full recomputation: D 4 × cp 2 against D 8 × cp 1 (the same 8 GPUs, the
    same FSDP mesh of 8). The model state and every unit's gather are the same; at the loss backward the logits'
    terms are those of s ÷ 2 tokens, half; a layer's backward holds ring attention's K/V, (2 + 1) × 2 · 16,384 · 8 ·
    128 × 2 B = 201,326,592 B, which cp 1 has not."""
    run = {"model": "llama-3.1-8b", "stack": "torchtitan", "seq_len": 32_768, "act_policy": "full", "loss": "outside"}
    ring, flat = _instants(parse_scenario({**run, "dp": 4, "cp": 2})), _instants(parse_scenario({**run, "dp": 8}))
    for category in ("unsharded_params",):
        assert ring["backward-layer-31"].bytes_of(category) == flat["backward-layer-31"].bytes_of(category)
    loss_ring, loss_flat = ring["loss-backward"], flat["loss-backward"]
    assert loss_ring.bytes_of("temporaries") * 2 == loss_flat.bytes_of("temporaries")
    kv = {e.what: e.bytes for e in ring["backward-layer-31"].entries if "ring attention" in e.what}
    assert list(kv.values()) == [201_326_592]
    assert not any("ring attention" in e.what for e in flat["backward-layer-31"].entries)


def test_communication_runs_over_d_times_cp() -> None:
    """The seed's 7B at D = 8, cp = 2 (Ψ = 14,000,000,000 B each): stage 3 ⌈(2 Ψ_p + Ψ_g) × 15 ÷ 16⌉ =
    39,375,000,000 B; stage 0's all-reduce over the 16 ranks too: ⌈2 Ψ_g × 15 ÷ 16⌉ = 26,250,000,000 B."""
    s = parse_scenario({"cp": 2})
    assert communication(s, 3).bytes == 39_375_000_000
    assert communication(s, 0).bytes == 26_250_000_000


def test_the_ring_s_traffic() -> None:
    """Llama-3.1-8B, s = 8,192, cp = 4, b = 1, bf16, no recomputation: local K and V = 2 · 2,048 · 8 · 128 = 4,194,304
    elements. All-gathers: 32 layers × 2 (forward, backward) × (cp − 1) 3 × 4,194,304 × 2 B = 1,610,612,736 B; dK/dV in
    FP32 every ring step: 32 × cp 4 × 4,194,304 × 4 B = 2,147,483,648 B; 3,758,096,384 B a step. Full recomputation
    adds the forward's all-gather again: 32 × 3 × 8,388,608 = 805,306,368 B more."""
    s = parse_scenario({"model": "llama-3.1-8b", "seq_len": 8192, "cp": 4, "dp": 2})
    t = context_parallel(s)
    assert t is not None and t.bytes == 3_758_096_384 and t.group == 4 and t in model_parallel_traffic(s)
    full = context_parallel(s.with_(act_policy="full"))
    assert full is not None and full.bytes == 3_758_096_384 + 805_306_368
    assert context_parallel(s.with_(cp=1)) is None


@pytest.mark.parametrize(("raw", "says"), [
    ({"cp": 3}, "2 × cp = 6 does not divide seq_len (4,096)"),
    ({"cp": 3, "model": "llama-3.1-8b"}, "2 × cp = 6 does not divide seq_len"),
    ({"cp": 2, "model": "gpt2"}, "is_causal"),
    ({"cp": 2, "model": "mistral-7b-v0.1"}, "sliding window"),
    ({"cp": 2, "pp": 2, "model": "llama-3.1-8b"}, "pipeline"),
    ({"cp": 2, "hpz": 2}, "hpZ"),
    ({"cp": 4, "model": "llama-3.1-8b", "stack": "torchtitan", "seq_len": 1024, "loss_chunks": 512}, "loss_chunks"),
])  # fmt: skip
def test_what_cp_cannot_be_is_refused_naming_cp(raw: dict[str, object], says: str) -> None:
    errors = _errors(raw)
    assert list(errors) == ["cp"] and says in errors["cp"]


@pytest.mark.parametrize("cp", [0, 1025, -1])
def test_cp_out_of_its_bounds_is_refused(cp: int) -> None:
    assert list(_errors({"cp": cp})) == ["cp"]


def test_the_activation_ledger_refuses_a_cp_that_does_not_split_the_sequence() -> None:
    with pytest.raises(ActivationInputError) as caught:
        activation_ledger(resolve("llama-3.1-8b").architecture, seq_len=4096, micro_batch=1, cp=3)
    assert caught.value.field == "cp"


@pytest.mark.parametrize("cp", [2, 4])
def test_the_fit_finder_s_smallest_d_is_the_first_d_whose_ledger_fits(cp: int) -> None:
    """The fit finder's smallest D at each stage equals a walk over D = 1, 2, … of the whole ledger's peaks with cp
    fixed (its closed form ⌈N ÷ D⌉ holds only at cp = 1: with cp it reads the ledger's ⌈N ÷ (D × cp)⌉ lines)."""
    s = parse_scenario({"cp": cp, "activation_bytes": "10GB", "capacity_bytes": "30GB"})
    found = {f.stage: f.smallest_dp for f in find_fit(s).stages}
    for stage in (1, 2, 3):
        fits = (d for d in range(1, 257) if compute_ledger(s.with_(dp=d)).stages[stage].peak.total <= 30 * 10**9)
        assert found[stage] == next(fits, None), stage
    assert found[3] is not None
