"""One layout's traffic per rank per optimizer step, and a lower bound on the time it takes on the device's links.

The bytes are the lab's two ledgers': the ZeRO / FSDP collectives of :mod:`app.ledger.state.communication` (each
group of ranks rounded as there) and the activations that tensor and pipeline parallelism move
(:mod:`app.ledger.state.parallel_traffic`).

Which link each crosses. Ranks are laid out as Megatron-LM does, tensor-parallel ranks adjacent, then data
parallel, then pipeline stages (rank = t_i + tp × (d_i + D × p_i)); context-parallel ranks sit between tensor
and data parallel, as torchtitan 0.3.0's mesh orders them (pp, dp_replicate, dp_shard, cp, tp); each node holds
``ranks_per_node`` consecutive ranks. A group then spans tp ranks (tensor parallel), tp × cp (context parallel),
tp × G ranks (a data-parallel group of G, a shard group or ZeRO++'s hpZ group; with cp, G = its size × cp),
tp × D × cp ranks (HSDP's replicas, the experts' strided group), or the whole world (a pipeline stage's neighbour
is tp × D ranks away). It stays within a node when its span fits in one and the node holds whole spans
(ranks_per_node a multiple of it); otherwise some group of its kind crosses nodes and
the step waits for it: its bytes go at the network's bandwidth.

The lower bound. A ring sends its bytes per rank at the slowest link it crosses, each direction at once (NCCL's
bus bandwidth: at scale, the per-GPU network). The two links can work at the same time, so the bound is the
busier link's time: max(bytes within nodes ÷ intra-node bandwidth, bytes across nodes ÷ network bandwidth).
It ignores latency (per message and per ring step), compute (and so recomputation's extra forward), overlap
with compute the other way round (it assumes perfect overlap of everything), congestion, and in-network
reduction (SHARP, NVLink SHARP), which can beat a ring. A run takes at least this long in communication; real
runs take longer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div
from app.ledger.pipeline import other_end
from app.ledger.scenario import Scenario, ScenarioError
from app.ledger.scenario.presets import Links
from app.ledger.state.communication import communication, group_bytes
from app.ledger.state.parallel_traffic import model_parallel_traffic

NS_PER_S = 10**9


@dataclass(frozen=True, slots=True)
class Part:
    """One group's bytes per rank per step and whether it crosses nodes."""

    what: str
    bytes: int
    span: int  # consecutive ranks the group's members lie among
    across_nodes: bool


@dataclass(frozen=True, slots=True)
class StepTraffic:
    parts: tuple[Part, ...]
    bytes: int  # every part's, per rank per step
    intra_ns: int  # the intra-node link's time: ⌈its bytes × 10^9 ÷ its bandwidth⌉
    inter_ns: int

    @property
    def lower_bound_ns(self) -> int:
        """The busier link's time: a lower bound on the step's communication (see the module)."""
        return max(self.intra_ns, self.inter_ns)


def crosses(span: int, ranks_per_node: int) -> bool:
    """Whether some group spanning ``span`` consecutive ranks crosses a node boundary."""
    return span > ranks_per_node or ranks_per_node % span != 0


def _zero_span(s: Scenario, across: bool, group: int) -> int:
    """The ranks a data-parallel group spans: tp × its size when its members are consecutive data-parallel ranks
    (the dense group, a shard group, the hpZ group; with cp, FSDP's dp_shard × cp group), tp × D × cp when strided
    (HSDP's replicas, the experts' group)."""
    consecutive = not across and group in (s.shard_group * s.cp, s.hpz)
    return s.tp * (group if consecutive else s.dp * s.cp)


def step_traffic(s: Scenario, links: Links) -> StepTraffic:
    """The run's traffic per rank per step at its stage, and its lower-bound time on ``links``."""
    rpn = s.ranks_per_node
    parts: list[Part] = []
    for (across, group), sent in sorted(group_bytes(communication(s, s.stage).terms).items()):
        if sent:
            span = _zero_span(s, across, group)
            what = f"ZeRO stage {s.stage} over {group:,} ranks" + (" (across HSDP groups)" if across else "")
            parts.append(Part(what, sent, span, crosses(span, rpn)))
    for t in model_parallel_traffic(s):
        parts.append(Part(t.what, t.bytes, t.span, crosses(t.span, rpn)))
    intra = sum(p.bytes for p in parts if not p.across_nodes)
    inter = sum(p.bytes for p in parts if p.across_nodes)
    return StepTraffic(
        tuple(parts),
        intra + inter,
        ceil_div(intra * NS_PER_S, links.intra_node),
        ceil_div(inter * NS_PER_S, links.inter_node),
    )


def by_bytes(t: StepTraffic) -> tuple[int, int]:
    return t.bytes, t.lower_bound_ns


def slowest_rank(s: Scenario, links: Links, key: Callable[[StepTraffic], tuple[int, int]] = by_bytes) -> StepTraffic:
    """The traffic of the rank the step waits for: with a pipeline, the end whose traffic ranks worse by ``key`` (the
    first stage holds the embedding, the last the head: their ZeRO collectives differ)."""
    here = step_traffic(s, links)
    if s.pp == 1:
        return here
    try:
        there = step_traffic(other_end(s), links)
    except ScenarioError:  # the other end's own inputs out of bounds: the search does not list such a layout
        return here
    return max(here, there, key=key)
