"""The scenario's values, typed, each with its default: GENERATED from app/ledger/scenario/declared.py.

Do not edit: change the field there and run ``python -m app.ledger.scenario.derive`` (see that module;
tests/ledger/scenario/test_derive.py fails while this file is stale). Field order is the receipt's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScenarioValues:
    """Every scenario input: the seed's example by default (``Scenario`` adds what it means)."""

    model: str = ""  # Model
    params: int = 7_000_000_000  # Parameters (N)
    dp: int = 8  # Sharding degree (D)
    param_bytes: int = 2  # Parameter width
    grad_bytes: int = 2  # Gradient width
    master_bytes: int = 4  # Master-copy width
    opt_states: int = 2  # Optimizer states
    opt_bytes: int = 4  # Optimizer-state width
    unit_params: int = 400_000_000  # Largest wrapped unit (U)
    gather_bytes: int = 2  # All-gather width
    prefetch: int = 0  # Prefetched units (P)
    stage: int = 3  # ZeRO stage run
    shard_group: int = 0  # Shard group (HSDP / MiCS); 0 means D
    hpz: int = 1  # Secondary partition (ZeRO++ hpZ)
    pp: int = 1  # Pipeline parallel (pp)
    pp_stage: str = "first"  # Pipeline stage budgeted
    ep: int = 1  # Expert parallel (ep)
    bucket_bytes: int = 0  # Communication buckets
    activation_bytes: int = 20_000_000_000  # Activation peak
    overhead_bytes: int = 0  # Runtime overhead
    contingency_pct: int = 0  # Contingency
    capacity_bytes: int = 80_000_000_000  # Device capacity
    name: str = ""  # Scenario name
    seq_len: int = 4096  # Sequence length (s)
    micro_batch: int = 1  # Micro-batch (b)
    act_bytes: int = 2  # Activation width
    act_policy: str = "none"  # Recomputation
    tp: int = 1  # Tensor parallel (t)
    sequence_parallel: int = 0  # Sequence parallel
    logits_bytes: int = 4  # Loss dtype width
    reduce_bytes: int = 2  # Reduce-scatter width
    reshard_after_forward: int = 1  # Reshard after forward
    norms: str = "unfused"  # RMSNorm kernel
    offload_optimizer: str = "none"  # Optimizer offload
    offload_param: str = "none"  # Parameter offload
    ranks_per_node: int = 8  # Ranks per node
    host_bytes: int = 2_000_000_000_000  # Host memory
    load_path: str = "partitioned"  # Model load
    stack: str = "plain-fsdp2"  # Training stack
    loss: str = "outside"  # Where the loss runs
    wrap: str = "root"  # FSDP units
    buffers: str = "none"  # Registered buffers
    reserve_bytes: int = 0  # Allocator reserve
    reserve_source: str = "declared"  # Reserve from
    ac_every: int = 1  # Checkpoint every N-th layer
    optimizer_impl: str = "for-loop"  # Optimizer implementation
    gqa: str = "native"  # Grouped K/V heads
    loss_chunks: int = 8  # Loss chunks
    routing_imbalance_pct: int = 100  # Routing imbalance (busiest expert)
    grad_accum: int = 1  # Gradient accumulation
    grad_sync: str = "every"  # Gradient sync under accumulation
    reshard_after_backward: int = 1  # Reshard after backward
    save_path: str = "sharded"  # Checkpoint save
    trainable_params: int = 7_000_000_000  # Trainable parameters
    frozen_bytes: int = 2  # Frozen parameter width
    lora_rank: int = 0  # LoRA rank
    lora_targets: str = ""  # LoRA target modules
    base_quant: str = "none"  # 4-bit base (QLoRA)
    frozen_layers: int = 0  # Frozen layers
    freeze_embed: int = 0  # Freeze the embedding
    cp: int = 1  # Context parallel (cp)
    frozen_modules: str = ""  # Frozen modules (every layer)
