"""The host ledger per node: what offload moves off the device, the pinned buffers it needs, and the
model-load peak, against the node's host memory.

Per rank, at each stage (P = ⌈N ÷ D⌉, the rank's partition), as DeepSpeed allocates it (its
``stage_1_and_2.py`` and ``stage3.py`` with ``offload_optimizer`` / ``offload_param``):

* optimizer offload to the CPU, stages 1–3: the FP32 master partition (P × master width), the
  optimizer states (P × states × width) and the FP32 gradient partition the CPU optimizer steps
  (P × 4 B); pinned buffers: at stages 1–2 a 16-bit staging copy of the partition (P × parameter
  width) and a gradient buffer of the largest parameter (its elements × gradient width); at stage 3
  the gradient partition in the gradients' own width (P × gradient width).
* to NVMe (ZeRO-Infinity, stage 3): the same state lives on the NVMe device; the host keeps the
  stage-3 gradient buffer and the optimizer's swap buffers, 4 × the largest sub-group's partition
  (min(P, 10⁹) elements) × 4 B. Below stage 3 DeepSpeed has no NVMe path: counted as the CPU.
* parameter offload, stage 3: the 16-bit partition (P × parameter width) in pinned host memory; to
  NVMe, up to ``max_in_cpu`` (10⁹) elements of it stay in pinned host memory, the rest on NVMe, with
  5 swap buffers of 10⁸ elements × parameter width pinned on the host.
* with FP32 training (no separate master) the CPU optimizer still steps an FP32 copy of the partition.

Node: the run's ranks on one node (ranks_per_node, or the run's D × tp × pp GPUs when fewer) × a rank's. Loading
(``load_path``): partitioned at stage 3 (the meta device or DeepSpeed's zero.Init, each rank loading its own shards)
the host holds nothing more; otherwise the whole model in FP32 (N × 4 B), on every rank (every-rank: transformers
5.23.0's from_pretrained on each rank, Accelerate's default) or on one rank per node (rank0: Accelerate 1.15.0's
cpu_ram_efficient_loading, where transformers keeps LOCAL_RANK 0's copy and puts the others on the meta device, then
broadcasts). FP32 shards are upcast from the checkpoint's 16-bit dtype one parameter at a time (fsdp2_prepare_model's
``param.data = param.data.to(torch.float32)``); safetensors 0.8.0 reads each checkpoint file into one buffer that
every tensor of the file shares, freed only when the file's last tensor is replaced: with one file (transformers
5.23.0 saves up to 50 GB per file) N × (2 + 4) B at the end of the upcast (tests/trace/test_load_traced.py measures
it with the profiler); several files free earlier, so it bounds them. Saving (``save_path``): sharded, each rank
writes its own shards (torch.distributed.checkpoint), no whole copy on the host; full-rank0, rank 0 gathers the full
state dicts into its host memory, the model's then the optimizer's (torch 2.13 ``get_model_state_dict`` /
``get_optimizer_state_dict`` with ``full_state_dict`` and ``cpu_offload``, which keep them on rank 0 only; Accelerate
1.15.0's FULL_STATE_DICT save, one after the other), so the larger of the two on rank 0's node, beside what training
holds there. The node's peak is the larger of loading and training with the save.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from app.ledger.arithmetic import n
from app.ledger.formula import Formula
from app.ledger.models.reference import resolve
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import shard_elements
from app.ledger.state.rules import PRODUCTION, STAGES, Rules

__all__ = [
    "OFFLOAD_LADDER",
    "HostLedger",
    "HostLine",
    "HostStage",
    "OffloadFit",
    "cheapest_offload",
    "host_ledger",
    "largest_tensor",
]

FP32 = 4
HALF = 2  # a checkpoint's 16-bit dtype (BF16 or FP16): transformers 5.23.0 loads in it (dtype="auto")
SUB_GROUP = 1_000_000_000  # DeepSpeed's sub_group_size default: the optimizer steps this many elements at a time
OPTIMIZER_SWAP_BUFFERS = 4  # offload_optimizer.buffer_count's default
PARAM_SWAP_BUFFERS = 5  # offload_param.buffer_count's default
PARAM_SWAP_ELEMENTS = 100_000_000  # offload_param.buffer_size's default
MAX_IN_CPU = 1_000_000_000  # offload_param.max_in_cpu's default: elements of the partition kept in CPU memory
_DS = "DeepSpeed 0.19.8"


@dataclass(frozen=True, slots=True)
class HostLine:
    """One term of a rank's off-device memory: on the host (RAM) or on the NVMe device."""

    what: str
    where: str  # "host" or "nvme"
    pinned: bool
    bytes: int  # per rank
    formula: Formula
    evidence: str


@dataclass(frozen=True, slots=True)
class HostStage:
    stage: int
    lines: tuple[HostLine, ...]
    per_rank: int  # host RAM per rank
    per_node: int  # host RAM of ranks_per_node ranks
    nvme_per_node: int
    load_peak: int  # host RAM of the node while the model is built
    load_formula: Formula  # arithmetic only (empty when nothing is built on the host)
    load_note: str
    save_peak: int  # host RAM of rank 0's node while a checkpoint is saved
    save_formula: Formula  # arithmetic only (empty when nothing whole is gathered)
    save_note: str
    peak: int  # the larger of load_peak and per_node + save_peak
    headroom: int  # host_bytes − peak
    fits: bool


@dataclass(frozen=True, slots=True)
class HostLedger:
    ranks_per_node: int  # the run's ranks on one node: min(ranks_per_node, D)
    capacity: int
    stages: tuple[HostStage, ...]


def largest_tensor(s: Scenario) -> int:
    """Elements of the largest parameter tensor: the model's, or without a model the largest unit."""
    return _largest_tensor(s.model) if s.model else s.unit_params


@lru_cache(maxsize=256)
def _largest_tensor(model: str) -> int:
    # The grouped tensors (decoder layers share one tuple, experts are one entry with a count): as many as
    # the model has kinds of tensor, not the millions of a large MoE's inventory one by one.
    groups = {id(u.tensors): u.tensors for u in resolve(model).inventory.units}
    return max(t.numel for tensors in groups.values() for t in tensors)


def _rank_lines(s: Scenario, stage: int, rules: Rules) -> list[HostLine]:
    optimizer = s.offload_optimizer if stage >= 1 else "none"
    trained = shard_elements(s.shards(count=s.trainable_params))  # the rank's ZeRO shard of what trains
    lines = _optimizer_lines(s, stage, rules, trained, optimizer) if optimizer != "none" else []
    if stage == 3 and s.offload_param != "none":
        lines += _parameter_lines(s, rules, shard_elements(s.shards()))
    return lines


def _optimizer_lines(s: Scenario, stage: int, rules: Rules, p: int, optimizer: str) -> list[HostLine]:
    """Optimizer offload (stages 1–3) of a partition of ``p`` elements: the FP32 partition the CPU optimizer
    steps, its states, the FP32 gradients it reads, and the pinned buffers DeepSpeed adds."""
    lines: list[HostLine] = []
    state_on = "nvme" if optimizer == "nvme" and stage == 3 else "host"
    why = f"{_DS} offload_optimizer = {optimizer}"
    if optimizer == "nvme" and stage < 3:
        why += " (ZeRO-Infinity's NVMe path is stage 3's: counted in host memory, as cpu)"
    # The CPU optimizer steps an FP32 partition: the master copy, or with FP32 training a copy of the
    # parameters' own (stage_1_and_2.py and stage3.py clone it to the CPU in FP32 either way).
    master = s.master_bytes or FP32
    lines.append(
        HostLine(
            "FP32 master partition" if s.master_bytes else "FP32 partition the CPU optimizer steps",
            state_on,
            state_on == "host" and stage < 3,
            p * master,
            Formula.of(f"{n(p)} elements × {master} B = {n(p * master)} B"),
            why,
        )
    )
    if s.opt_states:
        b = p * s.opt_states * s.opt_bytes
        lines.append(
            HostLine(
                "optimizer states",
                state_on,
                False,
                b,
                Formula.of(f"{n(p)} elements × {s.opt_bytes} B × {s.opt_states} = {n(b)} B"),
                why,
            )
        )
    lines.append(
        HostLine(
            "FP32 gradient partition (the CPU optimizer's input)",
            state_on,
            state_on == "host",
            p * FP32,
            Formula.of(f"{n(p)} elements × {FP32} B = {n(p * FP32)} B"),
            why,
        )
    )
    if rules.pinned_buffers:
        lines += _pinned_optimizer_buffers(s, stage, p, state_on)
    return lines


def _pinned_optimizer_buffers(s: Scenario, stage: int, p: int, state_on: str) -> list[HostLine]:
    """The pinned host buffers of optimizer offload: stages 1–2 stage a 16-bit copy and the largest
    parameter's gradient; stage 3 keeps the gradient partition pinned (and swap buffers for NVMe)."""
    lines: list[HostLine] = []
    if stage < 3:
        staging = p * s.param_bytes
        lines.append(
            HostLine(
                "pinned 16-bit staging copy of the partition",
                "host",
                True,
                staging,
                Formula.of(f"{n(p)} elements × {s.param_bytes} B = {n(staging)} B"),
                "stage_1_and_2.py: the step's 16-bit copy before it returns to the device",
            )
        )
        big = largest_tensor(s)
        buf = big * s.param_bytes  # in the model's type
        lines.append(
            HostLine(
                "pinned gradient buffer of the largest parameter",
                "host",
                True,
                buf,
                Formula.of(f"{n(big)} elements × {s.param_bytes} B = {n(buf)} B"),
                "stage_1_and_2.py: temp_grad_buffer_for_cpu_offload, in the model's type",
            )
        )
    else:
        buf = p * s.grad_bytes
        lines.append(
            HostLine(
                "pinned gradient partition in the gradients' width",
                "host",
                True,
                buf,
                Formula.of(f"{n(p)} elements × {s.grad_bytes} B = {n(buf)} B"),
                "stage3.py: grad_partitions_flat_buffer (also with NVMe)",
            )
        )
        if state_on == "nvme":
            group = min(p, SUB_GROUP)
            swap = OPTIMIZER_SWAP_BUFFERS * group * FP32
            lines.append(
                HostLine(
                    "pinned optimizer swap buffers",
                    "host",
                    True,
                    swap,
                    Formula.of(
                        f"{OPTIMIZER_SWAP_BUFFERS} × min({n(p)}, {n(SUB_GROUP)}) elements × {FP32} B = {n(swap)} B"
                    ),
                    "swap_tensor: buffer_count × the largest sub-group",
                )
            )
    return lines


def _parameter_lines(s: Scenario, rules: Rules, p: int) -> list[HostLine]:
    """Parameter offload (stage 3) of a partition of ``p`` elements: in pinned host RAM, or to NVMe."""
    lines: list[HostLine] = []
    # NVMe: up to max_in_cpu elements (10⁹ by default) of the partition stay pinned in host RAM.
    in_ram = p if s.offload_param == "cpu" else min(p, MAX_IN_CPU)
    on = "nvme" if s.offload_param == "nvme" else "host"
    lines.append(
        HostLine(
            "parameter partition" if on == "host" else "parameter partition kept in CPU memory (max_in_cpu)",
            "host",
            True,
            in_ram * s.param_bytes,
            Formula.of(f"{n(in_ram)} elements × {s.param_bytes} B = {n(in_ram * s.param_bytes)} B"),
            f"{_DS} offload_param = {s.offload_param}",
        )
    )
    if p > in_ram:
        rest = (p - in_ram) * s.param_bytes
        lines.append(
            HostLine(
                "parameter partition beyond max_in_cpu",
                "nvme",
                False,
                rest,
                Formula.of(f"({n(p)} − {n(in_ram)}) elements × {s.param_bytes} B = {n(rest)} B"),
                f"{_DS} offload_param = nvme",
            )
        )
    if on == "nvme" and rules.pinned_buffers:
        swap = PARAM_SWAP_BUFFERS * PARAM_SWAP_ELEMENTS * s.param_bytes
        lines.append(
            HostLine(
                "pinned parameter swap buffers",
                "host",
                True,
                swap,
                Formula.of(
                    f"{PARAM_SWAP_BUFFERS} × {n(PARAM_SWAP_ELEMENTS)} elements × {s.param_bytes} B = {n(swap)} B"
                ),
                "partitioned_param_swapper.py: buffer_count × buffer_size",
            )
        )
    return lines


def _load(s: Scenario, stage: int) -> tuple[int, Formula, str]:
    """The node's host RAM while the model is loaded: its bytes, the arithmetic, and why."""
    if s.load_path == "partitioned" and stage == 3:
        return 0, Formula(), "built partitioned (meta device or zero.Init), each rank loading only its own shards"
    copies = 1 if s.load_path == "rank0" else node_ranks(s)
    who = "1 copy" if s.load_path == "rank0" else f"{copies} rank{'s' if copies > 1 else ''}"
    if s.param_bytes == FP32:  # FP32 shards: upcast from the checkpoint's 16 bits, its buffers still held
        upcast = s.trainable_params if s.frozen_bytes != FP32 else s.params  # Accelerate upcasts what trains
        total = copies * (s.params * HALF + upcast * FP32)
        formula = Formula.of(f"{who} × ({n(s.params)} × {HALF} B + {n(upcast)} × {FP32} B) = {n(total)} B")
        note = ("the whole model on the host: the 16-bit checkpoint as read, and its FP32 upcast, held together until "
                "the last parameter is upcast (one checkpoint file; several free each file as its last tensor is "
                "upcast, so this bounds them)")  # fmt: skip
    else:
        total = copies * s.params * FP32
        formula = Formula.of(f"{who} × {n(s.params)} × {FP32} B = {n(total)} B")
        note = "the whole model built in FP32 on the host"
    if s.load_path == "partitioned":  # below stage 3 nothing is partitioned: every rank builds its replica
        note += " (partitioned construction needs stage 3)"
    elif s.load_path == "rank0":
        note += ", on one rank per node, then broadcast (the other ranks start on the meta device)"
    return total, formula, note


def _save(s: Scenario) -> tuple[int, Formula, str]:
    """Rank 0's node's host RAM while a checkpoint is saved: its bytes, the arithmetic, and why."""
    if s.save_path == "sharded":
        return 0, Formula(), "saved sharded (torch.distributed.checkpoint): each rank writes its own shards"
    frozen = s.frozen_params * s.frozen_bytes
    model = s.trainable_params * s.param_bytes + frozen
    per = s.opt_states * s.opt_bytes + s.master_bytes
    optimizer = s.trainable_params * per  # only what trains has optimizer state
    value = max(model, optimizer)
    model_terms = f"{n(s.trainable_params)} × {s.param_bytes} B" + (
        f" + {n(s.frozen_params)} × {s.frozen_bytes} B" if frozen else "")  # fmt: skip
    formula = Formula.of(f"max({model_terms} (the model's), {n(s.trainable_params)} × ({s.opt_states} × "
                         f"{s.opt_bytes} + {s.master_bytes}) B (the optimizer's)) = {n(value)} B")  # fmt: skip
    return value, formula, "full state dicts gathered to rank 0's host memory, the model's then the optimizer's"


def node_ranks(s: Scenario) -> int:
    """The run's ranks on one node: ranks_per_node, or all of the run's D × tp × pp GPUs when fewer."""
    return min(s.ranks_per_node, s.world)


def host_ledger(s: Scenario, rules: Rules = PRODUCTION) -> HostLedger:
    stages = []
    ranks = node_ranks(s)
    save, save_formula, save_note = _save(s)  # the same at every stage: whole state dicts
    for stage in STAGES:
        lines = tuple(_rank_lines(s, stage, rules))
        per_rank = sum(line.bytes for line in lines if line.where == "host")
        nvme = sum(line.bytes for line in lines if line.where == "nvme")
        load, load_formula, load_note = _load(s, stage)
        per_node = ranks * per_rank
        peak = max(load, per_node + save)  # offloaded state stays resident while rank 0 gathers
        stages.append(
            HostStage(
                stage,
                lines,
                per_rank,
                per_node,
                ranks * nvme,
                load,
                load_formula,
                load_note,
                save,
                save_formula,
                save_note,
                peak,
                s.host_bytes - peak,
                peak <= s.host_bytes,
            )
        )
    return HostLedger(ranks, s.host_bytes, tuple(stages))


# The offload choices from cheapest (nothing moved) to most (ZeRO-Infinity): (optimizer, parameters).
OFFLOAD_LADDER: tuple[tuple[str, str], ...] = (("none", "none"), ("cpu", "none"), ("cpu", "cpu"), ("nvme", "nvme"))


@dataclass(frozen=True, slots=True)
class OffloadFit:
    """The first rung of :data:`OFFLOAD_LADDER` on which the run's stage fits the device and the host."""

    offload_optimizer: str
    offload_param: str
    device_peak: int
    host_peak: int


def cheapest_offload(
    s: Scenario, device_peak: Callable[[Scenario], int], own_host: HostLedger | None = None
) -> OffloadFit | None:
    """The least offload that makes the run's stage fit both the device (``device_peak`` of the scenario
    with that offload, against its capacity) and the host memory per node; None when none does. Rungs a
    stage cannot use are skipped: no offload at stage 0, parameter offload at stage 3 only. ``own_host``, the
    scenario's own host ledger when the caller has it, answers for the scenario's own rung."""
    for optimizer, params in OFFLOAD_LADDER:
        if (optimizer != "none" and s.stage == 0) or (params != "none" and s.stage != 3):
            continue
        t = s.with_(offload_optimizer=optimizer, offload_param=params)
        peak = device_peak(t)
        host = (own_host if own_host is not None and t == s else host_ledger(t)).stages[s.stage]
        if peak <= s.allocatable_bytes and host.fits:
            return OffloadFit(optimizer, params, peak, host.peak)
    return None
