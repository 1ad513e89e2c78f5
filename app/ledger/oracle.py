"""The independent oracle: a second, direct stage table.

Deliberately naive and written separately from the ledger: it imports nothing from the
project, has no ownership table and no helpers, and spells out every cell. Check 1 compares
the ledger against it class by class.
"""

from __future__ import annotations


def stage_table(
    params: int,
    dp: int,
    param_bytes: int,
    grad_bytes: int,
    master_bytes: int,
    opt_states: int,
    opt_bytes: int,
    optimizer_offloaded: bool = False,
    params_offloaded: bool = False,
    expert_params: int = 0,
    ep: int = 1,
    shard_group: int = 0,
    hpz: int = 1,
) -> dict[int, dict[str, int]]:
    """Persistent bytes per busiest rank on the device for stages 0–3, by class, straight from the ZeRO
    paper; with offload, ZeRO-Offload's (Ren et al., ATC'21, §4) and ZeRO-Infinity's moves zero a cell.

    ``expert_params`` of the ``params`` are sharded over dp ÷ ep ranks (DeepSpeed-MoE), the rest over
    ``shard_group`` ranks (HSDP / MiCS; 0 = all dp); ``hpz`` > 1 adds ZeRO++'s secondary partition of
    ⌈params ÷ hpz⌉ parameters at stage 3 (Wang et al., ZeRO++, §3.2)."""
    group = shard_group if shard_group else dp
    if expert_params:
        # dense over the shard group, experts over their expert-data-parallel ranks, each rounded up
        dense = params - expert_params
        shard = (dense + group - 1) // group + (expert_params + dp // ep - 1) // (dp // ep)
    else:
        shard = (params + group - 1) // group  # the busiest rank's share, rounded up
    table = {
        0: {
            "parameters": params * param_bytes,
            "gradients": params * grad_bytes,
            "master_weights": params * master_bytes,
            "optimizer_states": params * opt_states * opt_bytes,
        },
        1: {
            "parameters": params * param_bytes,
            "gradients": params * grad_bytes,
            "master_weights": shard * master_bytes,
            "optimizer_states": shard * opt_states * opt_bytes,
        },
        2: {
            "parameters": params * param_bytes,
            "gradients": shard * grad_bytes,
            "master_weights": shard * master_bytes,
            "optimizer_states": shard * opt_states * opt_bytes,
        },
        3: {
            "parameters": shard * param_bytes,
            "gradients": shard * grad_bytes,
            "master_weights": shard * master_bytes,
            "optimizer_states": shard * opt_states * opt_bytes,
        },
    }
    if hpz > 1:  # the secondary partition sits beside the primary shard
        table[3]["parameters"] += (params + hpz - 1) // hpz * param_bytes
    if optimizer_offloaded:  # stages 1–3: master and optimizer states on the host; stages 2–3 the gradients too
        table[1]["master_weights"] = table[1]["optimizer_states"] = 0
        table[2]["master_weights"] = table[2]["optimizer_states"] = table[2]["gradients"] = 0
        table[3]["master_weights"] = table[3]["optimizer_states"] = table[3]["gradients"] = 0
    if params_offloaded:  # stage 3 only
        table[3]["parameters"] = 0
    return table


def host_table(
    params: int,
    dp: int,
    param_bytes: int,
    grad_bytes: int,
    master_bytes: int,
    opt_states: int,
    opt_bytes: int,
    offload_optimizer: str,
    offload_param: str,
    ranks_per_node: int,
    largest_tensor: int,
    world: int = 0,
    expert_params: int = 0,
    ep: int = 1,
    shard_group: int = 0,
) -> dict[int, int]:
    """Host RAM per node during training for stages 0–3, spelled out from DeepSpeed's offload
    allocations (stage_1_and_2.py, stage3.py, the swappers), every cell by hand."""
    group = shard_group if shard_group else dp
    if expert_params:
        p = (params - expert_params + group - 1) // group + (expert_params + dp // ep - 1) // (dp // ep)
    else:
        p = (params + group - 1) // group
    opt = opt_states * opt_bytes
    master = master_bytes if master_bytes else 4  # FP32 training: the CPU optimizer's own FP32 copy
    cpu, nvme = offload_optimizer == "cpu", offload_optimizer == "nvme"
    below3 = cpu or nvme  # stages 1–2 have no NVMe path: the state stays in host RAM either way
    per_rank = {
        0: 0,
        # master (or FP32 copy) + optimizer + FP32 grads + 16-bit staging copy + the largest parameter's gradient buffer
        1: (p * master + p * opt + p * 4 + p * param_bytes + largest_tensor * param_bytes) if below3 else 0,
        2: (p * master + p * opt + p * 4 + p * param_bytes + largest_tensor * param_bytes) if below3 else 0,
        3: 0,
    }
    if cpu:  # master + optimizer + FP32 grads in RAM, and the 16-bit gradient partition
        per_rank[3] += p * master + p * opt + p * 4 + p * grad_bytes
    if nvme:  # the state is on NVMe: RAM keeps the 16-bit gradient partition and 4 swap buffers
        per_rank[3] += p * grad_bytes + 4 * min(p, 1_000_000_000) * 4
    if offload_param == "cpu":
        per_rank[3] += p * param_bytes
    if offload_param == "nvme":  # max_in_cpu (10⁹) elements kept in RAM, and 5 swap buffers of 10⁸ elements
        per_rank[3] += min(p, 1_000_000_000) * param_bytes + 5 * 100_000_000 * param_bytes
    gpus = world if world else dp
    ranks = ranks_per_node if ranks_per_node < gpus else gpus  # a run of fewer GPUs than a node has
    return {stage: ranks * per_rank[stage] for stage in (0, 1, 2, 3)}
