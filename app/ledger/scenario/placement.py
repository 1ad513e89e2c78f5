"""The declarations of the layout's sharding inputs beyond D (the shard group, hpZ, pipeline and expert
parallelism) and of the host's (offload, ranks per node, host memory): their bounds, defaults and help texts.
:class:`ScenarioFields` (:mod:`app.ledger.scenario.declared`) declares each field with one of these, in its own
order."""

from __future__ import annotations

from typing import Any

from app.ledger.bounds import CP, ROUTING_IMBALANCE, TWO_50
from app.ledger.scenario.form import form, optional

SHARD_GROUP_FIELD: Any = optional(
    ge=1,
    le=131_072,
    title="Shard group (HSDP / MiCS)",
    description="Ranks of one shard group: state is sharded within it and replicated across the D ÷ group "
    "groups (FSDP2's HSDP mesh (replicate, shard), DeepSpeed mics_shard_size); gradients are reduce-scattered "
    "within the group, then all-reduced across groups. Must divide D. Default: D (one group, plain ZeRO).",
    examples=[8],
    json_schema_extra=form("parallelism", "ranks", None),
)

HPZ_FIELD: Any = optional(
    ge=1,
    le=131_072,
    title="Secondary partition (ZeRO++ hpZ)",
    description="DeepSpeed zero_hpz_partition_size at stage 3: besides its 1 ÷ D shard, each rank keeps a "
    "secondary 1 ÷ hpz shard of the parameters (usually hpz = GPUs per node), so backward all-gathers "
    "within the hpz group only. Must divide D; 1 is off.",
    examples=[8],
    json_schema_extra=form("parallelism", "ranks", 1),
)

PP_FIELD: Any = optional(
    ge=1,
    le=1_024,
    title="Pipeline parallel (pp)",
    description="Pipeline stages: with a model, each holds L ÷ pp layers (pp must divide L), the first also "
    "the embedding, the last the head; under 1F1B the first stage keeps pp micro batches of activations. "
    "The GPU count is D × tp × pp.",
    examples=[1],
    json_schema_extra=form("parallelism", "stages", 1),
)

PP_STAGE_FIELD: Any = optional(
    title="Pipeline stage budgeted",
    description="Which end of the pipeline this ledger is for (with pp > 1): first (the embedding and pp "
    "micro batches in flight) or last (the head, the logits, one micro batch). The answer shows both ends' "
    "peaks and which is the busier.",
    examples=["first"],
    json_schema_extra=form("parallelism", "stage", "first"),
)

CP_FIELD: Any = optional(
    ge=CP[0],
    le=CP[1],
    title="Context parallel (cp)",
    description="Ranks that split each sequence (torchtitan's context_parallel_degree, torch's ring attention): "
    "each keeps s ÷ cp tokens of every activation, the logits and the loss, plus the whole sequence's K and V of "
    "the layer in flight, all-gathered around the ring. FSDP shards state over D × cp (torchtitan's dp_shard_cp "
    "mesh). The GPU count is D × tp × pp × cp; 2 × cp must divide seq_len (the head-tail load balancer).",
    examples=[1],
    json_schema_extra=form("parallelism", "ranks", 1),
)

EP_FIELD: Any = optional(
    ge=1,
    le=1_024,
    title="Expert parallel (ep)",
    description="A mixture-of-experts model's experts split over ep ranks of the D (ep divides D and the "
    "experts): each rank holds E ÷ ep experts per layer, ZeRO shards them over D ÷ ep, and each MoE layer "
    "all-to-alls its tokens.",
    examples=[1],
    json_schema_extra=form("parallelism", "ranks", 1),
)

ROUTING_IMBALANCE_PCT_FIELD: Any = optional(
    ge=ROUTING_IMBALANCE[0],
    le=ROUTING_IMBALANCE[1],
    title="Routing imbalance (busiest expert)",
    description="With expert parallelism on a mixture-of-experts model: the busiest rank's routed token slots "
    "over the balanced k·s·b, in percent (100 = balanced). Its experts' activations and its all-to-all "
    "receive buffer grow with it. Without ep every rank runs all experts on its own tokens in one grouped "
    "GEMM, and the routing moves nothing.",
    examples=[100],
    json_schema_extra=form("parallelism", "%", 100),
)

OFFLOAD_OPTIMIZER_FIELD: Any = optional(
    title="Optimizer offload",
    description="Where the FP32 master copy, the optimizer states and the FP32 gradient partition the CPU "
    "optimizer steps live, at stages 1–3 (DeepSpeed offload_optimizer; FSDP2's CPUOffloadPolicy): none "
    "(the device), cpu (host memory, pinned) or nvme (ZeRO-Infinity). Off the device, they join the host "
    "ledger.",
    examples=["cpu"],
    json_schema_extra=form("host", "device", "none"),
)

OFFLOAD_PARAM_FIELD: Any = optional(
    title="Parameter offload",
    description="Where stage 3's parameter shards live between uses (DeepSpeed offload_param): none, cpu or "
    "nvme. Each unit is still gathered on the device to compute.",
    examples=["none"],
    json_schema_extra=form("host", "device", "none"),
)

RANKS_PER_NODE_FIELD: Any = optional(
    ge=1,
    le=1_024,
    title="Ranks per node",
    description="GPUs (ranks) sharing one host's memory: the host ledger is per node.",
    examples=[8],
    json_schema_extra=form("host", "ranks", 8),
)

HOST_BYTES_FIELD: Any = optional(
    ge=1,
    le=TWO_50,
    title="Host memory",
    description="Usable host RAM per node, for the host fit verdict (a DGX H100 has 2 TB).",
    examples=[2_000_000_000_000],
    json_schema_extra=form("host", "bytes", 2_000_000_000_000),
)
