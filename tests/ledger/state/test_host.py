"""The host ledger per node (offload, pinned buffers, loading) and DeepSpeed's own estimator beside it.

The figures are hand-computed in each docstring; DeepSpeed's estimator formulas are quoted from
``deepspeed/runtime/zero/stage3.py`` and ``stage_1_and_2.py`` (DeepSpeed 0.19.8).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.interop.deepspeed.estimator import compare, not_comparable
from app.ledger.ledger import compute_ledger
from app.ledger.scenario import Scenario, parse_scenario
from app.ledger.state.host import host_ledger, largest_tensor
from app.ledger.verify.oracle import host_table
from tests.support.strategies import scenarios

N_7B = 6_738_415_616
P_7B = 842_301_952  # ⌈N ÷ 8⌉


def scenario(**fields: object) -> Scenario:
    return parse_scenario({"model": "llama-2-7b", **fields})


def test_optimizer_offload_to_the_cpu_at_stage_3() -> None:
    """Llama-2-7B, D = 8, 8 ranks per node, optimizer offload to the CPU. P = 842,301,952.

    * device: stage 3 keeps only the 16-bit parameter shard, P × 2 B = 1,684,603,904 B.
    * host per rank: master P × 4 + Adam P × 2 × 4 + FP32 gradients P × 4 + the pinned 16-bit gradient
      partition P × 2 = 18 × P = 15,161,435,136 B; per node × 8 = 121,291,481,088 B.
    * loading: built partitioned (load_path partitioned), 0 B; at stages 0–2 every rank builds the model in FP32:
      8 × 6,738,415,616 × 4 = 215,629,299,712 B, which is stage 0–2's host peak.
    """
    s = scenario(offload_optimizer="cpu")
    ledger = compute_ledger(s)
    assert ledger.stages[3].persistent == P_7B * 2
    host = ledger.host.stages
    assert host[3].per_rank == 18 * P_7B == 15_161_435_136
    assert host[3].per_node == 121_291_481_088 and host[3].load_peak == 0 and host[3].peak == 121_291_481_088
    assert [h.load_peak for h in host[:3]] == [215_629_299_712] * 3
    assert host[0].per_node == 0  # no ZeRO, no offload
    assert all(h.fits for h in host)  # against the default 2 TB


def test_nvme_keeps_swap_buffers_on_the_host() -> None:
    """Both offloads to NVMe at stage 3 (ZeRO-Infinity): the optimizer state is on the NVMe device; the host
    keeps the 16-bit gradient partition P × 2, the optimizer's 4 swap buffers of min(P, 10⁹) × 4 B, the
    parameter partition up to max_in_cpu (10⁹ > P: all of it, P × 2) and the parameters' 5 swap buffers of
    10⁸ × 2 B: 1,684,603,904 + 13,476,831,232 + 1,684,603,904 + 1,000,000,000 = 17,846,039,040 B per rank."""
    h = host_ledger(scenario(offload_optimizer="nvme", offload_param="nvme")).stages[3]
    assert h.per_rank == 2 * P_7B + 4 * P_7B * 4 + 2 * P_7B + 5 * 100_000_000 * 2 == 17_846_039_040
    assert h.nvme_per_node == 8 * (4 + 8 + 4) * P_7B


def test_fp32_training_offloads_an_fp32_copy() -> None:
    """FP32 parameters (no separate master): the CPU optimizer still steps an FP32 partition, P × 4 B."""
    h = host_ledger(scenario(offload_optimizer="cpu", param_bytes=4, master_bytes=0, grad_bytes=4)).stages[2]
    assert any(x.what == "FP32 partition the CPU optimizer steps" and x.bytes == 4 * P_7B for x in h.lines)


def test_the_host_fit_verdict_reads_the_node_s_memory() -> None:
    s = scenario(offload_optimizer="cpu", host_bytes="100GB")
    h = host_ledger(s).stages[3]
    assert not h.fits and h.headroom == 100_000_000_000 - 121_291_481_088


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.sampled_from([1, 4, 8]))
def test_the_host_ledger_is_the_oracle(s: Scenario, ranks: int) -> None:
    s = s.with_(ranks_per_node=ranks)
    table = host_table(s.params, s.dp, s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_states, s.opt_bytes,
                       s.offload_optimizer, s.offload_param, s.ranks_per_node, largest_tensor(s))  # fmt: skip
    assert {h.stage: h.per_node for h in host_ledger(s).stages} == table


# --------------------------------------------------------------------------- DeepSpeed's estimator


def test_deepspeed_estimator_row_for_zero3_cpu_offload() -> None:
    """estimate_zero3_model_states_mem_needs(total_params=6,738,415,616, largest_layer_params=131,072,000
    (the embedding, 32,000 × 4,096), num_gpus_per_node=8, num_nodes=1, cpu_offload=True,
    cpu_offload_params=False, zero_init=True):
    gpu = 4 × 131,072,000 + int(2 × N ÷ 8) = 524,288,000 + 1,684,603,904 = 2,208,891,904;
    cpu = N × 16 × 1 × 1.5 = 161,721,974,784, printed ÷ 2³⁰ as " 150.62GB |   2.06GB | …"."""
    ledger = compute_ledger(scenario(offload_optimizer="cpu"))
    row = compare(ledger, ledger.host)
    assert row is not None
    assert (row.gpu, row.cpu) == (2_208_891_904, 161_721_974_784)
    # DeepSpeed's own line on Python 3.11+: f" {cpu:7.2f}GB | …" and the enum member's name for cpu
    assert (
        row.printed
        == "  150.62GB |   2.06GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=1"
    )
    said = " ".join(row.differences)
    assert "161,721,974,784 B = 161.72 GB" in said  # GiB printed as GB, named
    assert "additional_buffer_factor 1.5" in said and "4 B × largest_layer_params" in said


@pytest.mark.parametrize("stage", [2, 3])
@pytest.mark.parametrize("optimizer", ["none", "cpu"])
@pytest.mark.parametrize("params", ["none", "cpu"])
@pytest.mark.parametrize("load_path", ["every-rank", "partitioned", "rank0"])
@pytest.mark.parametrize("dp", [8, 16, 64])
def test_the_host_ledger_agrees_with_deepspeed_where_both_model_the_same(
    stage: int, optimizer: str, params: str, load_path: str, dp: int
) -> None:
    """Before its 1.5 factor, DeepSpeed's host figure equals the lab's node peak without the pinned buffers
    (which DeepSpeed has no term for): 16 B (18 with the parameters) per parameter per node when offloading,
    or 4 B × N per rank while loading. Where it does not, a difference line names why."""
    s = scenario(stage=stage, offload_optimizer=optimizer, offload_param=params, load_path=load_path, dp=dp)
    ledger = compute_ledger(s)
    row = compare(ledger, ledger.host)
    if row is None:
        assert not_comparable(s)
        return
    h = ledger.host.stages[stage]
    pinned = ledger.host.ranks_per_node * sum(x.bytes for x in h.lines if x.what.startswith("pinned"))
    lab = max(h.per_node - pinned, h.load_peak)
    before = row.cpu * 10 // 15
    said = " ".join(row.differences)
    if before != lab:
        assert (
            (
                "largest layer in FP32 per GPU" in said
                and stage == 3
                and load_path == "partitioned"
                and optimizer == "none"
            )
            or ("every GPU of all" in said and stage == 2 and optimizer == "cpu")
            or ("loads one copy per node" in said and load_path == "rank0")
        ), (before, lab, said)
    if pinned:
        assert f"{pinned:,} B per node) are terms it does not have" in said


def test_the_estimator_does_not_apply_outside_its_layout() -> None:
    fsdp2 = scenario(param_bytes=4, master_bytes=0, grad_bytes=4)
    assert "16-bit parameters" in (not_comparable(fsdp2) or "")
    assert compare(compute_ledger(fsdp2), compute_ledger(fsdp2).host) is None
    assert "NVMe" in (not_comparable(scenario(offload_optimizer="nvme")) or "")
    assert "whole nodes" in (not_comparable(scenario(dp=12)) or "")


def test_a_full_state_dict_save_holds_the_larger_of_the_model_and_the_optimizer_on_rank_0s_node() -> None:
    """save_path full-rank0: the model's full state dict (N × parameter width), then the optimizer's (N × (states ×
    width + master)); each rank writing its own shards (sharded) holds no whole copy. Held to torch's own
    get_model_state_dict / get_optimizer_state_dict in tests/trace/test_save_traced.py."""
    seed = {"params": 7_000_000_000, "dp": 8, "host_bytes": 80_000_000_000}
    full = host_ledger(parse_scenario({**seed, "save_path": "full-rank0"}))
    assert {st.save_peak for st in full.stages} == {7_000_000_000 * (2 * 4 + 4)}  # Adam's FP32 states + FP32 master
    assert not full.stages[3].fits and full.stages[3].peak == 84_000_000_000
    assert "the optimizer's" in full.stages[3].save_formula.text
    sharded = host_ledger(parse_scenario(seed))
    assert {st.save_peak for st in sharded.stages} == {0} and sharded.stages[3].fits
    offloaded = host_ledger(parse_scenario({**seed, "save_path": "full-rank0", "offload_optimizer": "cpu"})).stages[3]
    assert offloaded.peak == offloaded.per_node + offloaded.save_peak  # the offloaded state stays while rank 0 saves
    hf = parse_scenario({"model": "llama-2-7b", "stack": "hf-fsdp2"})  # the HF Trainer's FULL_STATE_DICT
    assert hf.save_path == "full-rank0"
    assert host_ledger(hf).stages[3].save_peak == hf.params * 2 * 4  # FP32 AdamW states outweigh FP32 parameters


N_8B = 8_030_261_248  # Llama 3.1 8B


@pytest.mark.parametrize(
    ("raw", "at_stage_3", "below_3"),
    [
        # FP32 shards (hf-fsdp2): the 16-bit checkpoint as read and its FP32 upcast, 6 B per parameter per copy
        ({"stack": "hf-fsdp2"}, 8 * N_8B * 6, 8 * N_8B * 6),
        ({"stack": "hf-fsdp2", "load_path": "rank0"}, N_8B * 6, N_8B * 6),
        ({"stack": "hf-fsdp2", "load_path": "partitioned"}, 0, 8 * N_8B * 6),
        # the seed's 16-bit layout: the whole model built in FP32, DeepSpeed's figure
        ({"load_path": "every-rank"}, 8 * N_8B * 4, 8 * N_8B * 4),
        ({"load_path": "rank0"}, N_8B * 4, N_8B * 4),
        ({}, 0, 8 * N_8B * 4),  # the plain stack's partitioned construction: stage 3 only
        ({"load_path": "every-rank", "ranks_per_node": 4}, 4 * N_8B * 4, 4 * N_8B * 4),
    ],
)
def test_the_load_path_sets_the_copies_per_node(raw: dict[str, object], at_stage_3: int, below_3: int) -> None:
    """Per node: every rank a whole copy (every-rank), one (rank0: transformers keeps LOCAL_RANK 0's), or none at
    stage 3 (partitioned). 6 B per parameter where the shards are FP32: tests/trace/test_load_traced.py measures it."""
    host = host_ledger(parse_scenario({"model": "llama-3.1-8b", **raw})).stages
    assert host[3].load_peak == at_stage_3
    assert {h.load_peak for h in host[:3]} == {below_3}


@pytest.mark.parametrize(("legacy", "load"), [("1", "partitioned"), ("0", "every-rank")])
def test_a_link_from_before_load_path_keeps_its_meaning(legacy: str, load: str) -> None:
    """zero_init, the input load_path replaced: 1 was built partitioned, 0 every rank building the model."""
    from app.ledger.scenario.inputs import StrictScenarioIn

    assert parse_scenario({"model": "llama-2-7b", "zero_init": legacy}).load_path == load
    assert StrictScenarioIn.model_validate({"zero_init": int(legacy)}).load_path == load
    typed = parse_scenario({"zero_init": legacy, "load_path": "rank0"})  # the new input wins
    assert typed.load_path == "rank0"


def test_a_zero_init_no_link_ever_carried_is_still_refused_by_the_json_api() -> None:
    from pydantic import ValidationError

    from app.ledger.scenario.inputs import StrictScenarioIn

    with pytest.raises(ValidationError) as refused:
        StrictScenarioIn.model_validate({"zero_init": 2})
    assert refused.value.errors()[0]["loc"] == ("zero_init",)
