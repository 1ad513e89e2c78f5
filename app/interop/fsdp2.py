"""A scenario as an FSDP2 snippet: ``fully_shard`` per decoder layer and on the root, with notes.

The snippet is a sketch for ``model``, a transformers-style decoder whose layers are ``model.model.layers``,
on the scenario's mesh. The notes name what FSDP2 cannot express (a stage below 3, a separate master copy,
buckets, ZeRO++'s secondary partition) and what the snippet leaves to the script (tensor, pipeline and
expert parallelism).
"""

from __future__ import annotations

from app.interop.snippet import Snippet
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link
from app.ledger.scenario.stacks import STACK_STAGES

__all__ = ["fsdp2_snippet"]

_TORCH_TYPES = {1: "torch.float8_e4m3fn", 2: "torch.bfloat16", 4: "torch.float32", 8: "torch.float64"}


def fsdp2_snippet(s: Scenario) -> Snippet:
    """``fully_shard`` per decoder layer and on the root, on the scenario's mesh (HSDP's 2-D one for a shard
    group), with its MixedPrecisionPolicy, reshard_after_forward, recomputation, prefetch and optimizer (a
    sketch for ``model``, a transformers-style decoder whose layers are ``model.model.layers``)."""
    notes: list[str] = []
    reshard = _reshard(s, notes)
    _offload_notes(s, notes)
    lines = _head(s) + _sharding(s, reshard) + _optimizer(s, notes) + _accumulation(s)
    _notes(s, notes)
    return Snippet("\n".join(lines) + "\n", tuple(notes))


def _offload(s: Scenario) -> bool:
    """FSDP2's CPUOffloadPolicy: parameters, gradients and the optimizer step on the CPU, all together."""
    return s.offload_optimizer == "cpu" and s.offload_param == "cpu"


def _mesh(s: Scenario) -> str:
    """The mesh every ``fully_shard`` takes: 1-D over D, or HSDP's 2-D (replicate, shard) for a shard group."""
    if s.shard_group >= s.dp:
        return f'mesh = init_device_mesh("cuda", ({s.dp},))  # D = {s.dp:,} ranks shard the state'
    groups = s.dp // s.shard_group
    return (
        f'mesh = init_device_mesh("cuda", ({groups}, {s.shard_group}), mesh_dim_names=("replicate", "shard"))'
        f"  # HSDP: sharded over {s.shard_group:,} ranks, replicated across {groups:,} groups"
    )


def _reshard(s: Scenario, notes: list[str]) -> bool:
    """reshard_after_forward: stage 2 keeps the gathered parameters to backward; below it FSDP2 shards anyway."""
    reshard = bool(s.reshard_after_forward)
    if s.stage == 2 and reshard:
        reshard = False
        notes.append(
            "stage 2: the layers keep their gathered parameters from forward to backward "
            "(reshard_after_forward=False), FSDP2's nearest to ZeRO-2"
        )
    elif s.stage not in STACK_STAGES[s.stack]:
        closer = "DDP" if s.stage == 0 else "ZeRO-1"
        notes.append(
            f"stage {s.stage}: FSDP2 shards parameters, so it cannot keep them replicated ({closer} is "
            "the closer fit); the snippet shards fully"
        )
    return reshard


def _offload_notes(s: Scenario, notes: list[str]) -> None:
    if s.offload_optimizer == "none" and s.offload_param == "none":
        return
    if not _offload(s):
        notes.append(
            f"offload_optimizer {s.offload_optimizer}, offload_param {s.offload_param}: FSDP2's "
            "CPUOffloadPolicy moves parameters, gradients and the optimizer step to the CPU together "
            "(both cpu); not written"
        )
    elif s.stage != 3:
        notes.append("CPUOffloadPolicy offloads the sharded parameters too: the lab's stage 3 rows are FSDP2's")


def _head(s: Scenario) -> list[str]:
    """The imports, the mesh and the parameters' width."""
    lines = [
        f"# zero3-lab scenario: {link(s)}",
        "# FSDP2 for it; run under torchrun. `model` is a transformers-style decoder (model.model.layers).",
        "import torch",
    ]
    if s.act_policy == "full":
        lines.append("from torch.distributed._composable import checkpoint")
    lines += [
        "from torch.distributed.device_mesh import init_device_mesh",
        "from torch.distributed.fsdp import "
        + ("CPUOffloadPolicy, " if _offload(s) else "")
        + "MixedPrecisionPolicy, fully_shard",
        "",
        _mesh(s),
    ]
    if s.param_bytes != 4:
        lines.append(f"model.to({_TORCH_TYPES[s.param_bytes]})  # the sharded parameters' width: {s.param_bytes} B")
    return lines


def _sharding(s: Scenario, reshard: bool) -> list[str]:
    """The mixed-precision policy, fully_shard per layer (checkpointed for full recomputation) and on the
    root, and prefetch P units ahead."""
    offload = ", offload_policy=CPUOffloadPolicy()" if _offload(s) else ""
    lines = [
        f"mp = MixedPrecisionPolicy(param_dtype={_TORCH_TYPES[s.gather_bytes]}, "
        f"reduce_dtype={_TORCH_TYPES[s.reduce_bytes]})",
        "layers = list(model.model.layers)",
        "for layer in layers:",
    ]
    if s.act_policy == "full":
        lines.append("    checkpoint(layer)  # full recomputation: each layer keeps only its input")
    lines += [
        f"    fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward={reshard}{offload})",
        f"fully_shard(model, mesh=mesh, mp_policy=mp{offload})  # the root: embeddings, final norm and head",
    ]
    if s.prefetch:
        units = f"{s.prefetch} unit{'s' if s.prefetch > 1 else ''}"
        lines += [
            f"for i, layer in enumerate(layers):  # prefetch P = {units} ahead",
            f"    layer.set_modules_to_forward_prefetch(layers[i + 1 : i + 1 + {s.prefetch}])",
            f"    layer.set_modules_to_backward_prefetch(layers[max(0, i - {s.prefetch}) : i][::-1])",
        ]
    return lines


def _optimizer(s: Scenario, notes: list[str]) -> list[str]:
    """The torch.optim optimizer with the scenario's count of states (none for a count torch has no name for)."""
    if s.opt_states == 2:
        return ["optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # two states per parameter"]
    if s.opt_states == 1:
        return ["optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)  # one state"]
    if s.opt_states == 0:
        return ["optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)  # no state"]
    notes.append(f"opt_states {s.opt_states}: no torch.optim optimizer written; use one with that many states")
    return []


def _accumulation(s: Scenario) -> list[str]:
    """The step's loop over its micro batches, with the sync and resharding the scenario asks between them."""
    if s.grad_accum == 1:
        return []
    between = []
    if s.grad_sync == "last":
        between.append("    model.set_requires_gradient_sync(last)  # no reduce-scatter before the last")
    if not s.reshard_after_backward:
        between.append("    model.set_reshard_after_backward(last)  # keep the units gathered between micro batches")
    return [
        "",
        f"for i, (inputs, labels) in enumerate(micro_batches):  # {s.grad_accum} a step",
        f"    last = i == {s.grad_accum - 1}",
        *between,
        f"    loss_fn(model(inputs), labels).div({s.grad_accum}).backward()",
        "optimizer.step()",
        "optimizer.zero_grad(set_to_none=True)",
    ]


def _notes(s: Scenario, notes: list[str]) -> None:
    """What FSDP2 cannot say about the scenario, input by input."""
    if s.opt_states and s.opt_bytes != s.param_bytes:
        notes.append(
            f"opt_bytes {s.opt_bytes}: torch.optim keeps its states in the parameters' width ({s.param_bytes} B)"
        )
    if s.master_bytes:
        notes.append(
            f"master_bytes {s.master_bytes}: FSDP2 keeps no separate master copy (the optimizer steps "
            "the sharded parameters); use FP32 parameters (param_bytes 4) for the same precision"
        )
    if s.act_policy == "selective":
        notes.append("selective recomputation: checkpoint the attention core inside each layer (not written)")
    if s.bucket_bytes:
        notes.append(f"bucket_bytes {s.bucket_bytes:,} B: FSDP2 has no buckets (one collective per unit)")
    if s.tp > 1:
        notes.append(f"tp {s.tp}: a 2-D mesh (dp, tp) with parallelize_module; not written")
    if s.hpz > 1:
        notes.append(
            f"hpz {s.hpz}: ZeRO++'s secondary parameter partition has no FSDP2 equivalent (a shard group, "
            "HSDP, is the nearest); not written"
        )
    if s.pp > 1:
        notes.append(
            f"pp {s.pp}: pipeline parallelism is torch.distributed.pipelining (a PipelineStage per rank and a "
            "schedule such as Schedule1F1B); not written"
        )
    if s.ep > 1:
        notes.append(
            f"ep {s.ep}: expert parallelism is the model's own code (its experts split over {s.ep} ranks); not written"
        )
    if s.cp > 1:
        notes.append(
            f"cp {s.cp}: context parallelism is torch.distributed.tensor.experimental.context_parallel around the "
            f"step, and fully_shard over a flattened (dp_shard, cp) mesh of {s.shard_group * s.cp} ranks; not written"
        )
