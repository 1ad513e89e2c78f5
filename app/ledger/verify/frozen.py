"""The frozen references of checks 5 and 8: values computed by hand, in the spec's worked example and
in the model reference's instants, that the ledger must reproduce exactly under the production rules
(a mutant that changes one of them is killed by the check that reads it)."""

from __future__ import annotations

from app.ledger.scenario import DEFAULT_SCENARIO, parse_scenario

FROZEN_SCENARIO = DEFAULT_SCENARIO

# Hand-computed from the seed (7B params, D = 8, BF16 params and grads, FP32 master, two FP32
# Adam moments, U = 400M, P = 0, 20 GB declared activations): the spec's worked example.
FROZEN_PERSISTENT: dict[int, dict[str, int]] = {
    0: {
        "parameters": 14_000_000_000,
        "gradients": 14_000_000_000,
        "master_weights": 28_000_000_000,
        "optimizer_states": 56_000_000_000,
    },
    1: {
        "parameters": 14_000_000_000,
        "gradients": 14_000_000_000,
        "master_weights": 3_500_000_000,
        "optimizer_states": 7_000_000_000,
    },
    2: {
        "parameters": 14_000_000_000,
        "gradients": 1_750_000_000,
        "master_weights": 3_500_000_000,
        "optimizer_states": 7_000_000_000,
    },
    3: {
        "parameters": 1_750_000_000,
        "gradients": 1_750_000_000,
        "master_weights": 3_500_000_000,
        "optimizer_states": 7_000_000_000,
    },
}
# The seed with both offloads to the CPU, host RAM per node (8 ranks, P = 875,000,000, largest tensor U = 400M):
# stages 1–2: 8 × (P × (4 + 2 × 4 + 4 + 2) + 400,000,000 × 2) = 8 × 16,550,000,000;
# stage 3: 8 × P × (4 + 2 × 4 + 4 + 2 + 2) = 8 × 17,500,000,000.
FROZEN_HOST: dict[int, int] = {0: 0, 1: 132_400_000_000, 2: 132_400_000_000, 3: 140_000_000_000}
# The seed in two shard groups of 4 (HSDP): every sharded class over 4 ranks, ⌈7e9 ÷ 4⌉ = 1,750,000,000
# elements: stage 1 14e9 + 14e9 + 1.75e9 × 12 = 49e9; stage 2 14e9 + 1.75e9 × 14 = 38.5e9; stage 3 1.75e9 × 16.
FROZEN_HSDP: dict[int, int] = {0: 112_000_000_000, 1: 49_000_000_000, 2: 38_500_000_000, 3: 28_000_000_000}
FROZEN_PEAK: dict[int, dict[str, int]] = {
    0: {"gather": 0, "activations": 20_000_000_000, "total": 132_000_000_000},
    1: {"gather": 0, "activations": 20_000_000_000, "total": 58_500_000_000},
    2: {"gather": 0, "activations": 20_000_000_000, "total": 46_250_000_000},
    3: {"gather": 700_000_000, "activations": 20_000_000_000, "total": 34_700_000_000},
}


# The frozen model reference: Llama-2-7B in FSDP2's layout (FP32 shards, gradients and AdamW states, no
# master copy, BF16 all-gather and activations, FP32 reduce-scatter and logits), D = 8, s = 4,096, b = 1,
# full recomputation. Its stage-3 peak is late in backward, where gradients, the reduce-scatter input,
# the prefetch and one layer's recomputed activations all count. Hand-computed in tests/ledger/peak/test_schedule.py;
# traced with `zero3-lab trace` in docs/fidelity.md.
FROZEN_MODEL_INPUTS: dict[str, int | str] = {
    "model": "llama-2-7b",
    "dp": 8,
    "param_bytes": 4,
    "master_bytes": 0,
    "grad_bytes": 4,
    "gather_bytes": 2,
    "reduce_bytes": 4,
    "seq_len": 4096,
    "act_policy": "full",
    "norms": "fused",  # as hand-computed (the default, unfused, adds 4·s·b·h per norm of the recomputed layer)
}
FROZEN_MODEL_SCENARIO = parse_scenario(FROZEN_MODEL_INPUTS)
FROZEN_MODEL_TITLE = "the model reference (Llama-2-7B, FSDP2 layout, D = 8, full recomputation)"
# Per stage: the worst instant and its total; for stage 3 every instant's total.
FROZEN_MODEL_PEAK: dict[int, tuple[str, int]] = {
    0: ("optimizer-step", 108_863_225_856),
    1: ("optimizer-step", 60_776_812_544),
    2: ("root-post-backward", 39_027_396_608),
    3: ("backward-layer-1", 16_549_787_648),
}
FROZEN_MODEL_INSTANTS: dict[str, int] = {
    "forward-layer-0": 11_999_303_680,
    "forward-layer-1": 11_913_328_640,
    "forward-layer-31": 12_919_961_600,
    "end-of-forward": 12_034_930_688,
    "loss-backward": 13_345_650_688,
    "head-backward": 12_735_404_032,
    "backward-layer-31-unshard": 12_810_901_504,
    "backward-layer-31": 13_711_136_768,
    "backward-layer-31-done": 13_182_113_792,
    "backward-layer-30-unshard": 13_688_072_192,
    "backward-layer-30": 14_588_307_456,
    "backward-layer-30-done": 14_059_284_480,
    "backward-layer-1-unshard": 15_649_552_384,
    "backward-layer-1": 16_549_787_648,
    "backward-layer-1-done": 16_020_764_672,
    "backward-layer-0-unshard": 15_717_189_632,
    "backward-layer-0": 16_212_658_176,
    "backward-layer-0-done": 15_683_635_200,
    "root-gradients": 15_203_883_008,
    "root-post-backward": 14_918_645_760,
    "optimizer-step": 13_607_903_232,
}
