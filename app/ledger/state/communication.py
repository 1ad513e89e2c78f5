"""Ring-algorithm volume sent per rank per optimizer step (spec "Communication per step").

Each collective sends (G − 1) ÷ G of its buffer per rank over a group of G ranks. Plain ZeRO runs every
collective over the D ranks. Hierarchical layouts run some over smaller groups:

- **HSDP / MiCS** (a shard group of S < D ranks): the all-gathers and the reduce-scatter run within the
  group, and the gradient shard (1 ÷ S of the gradients) is then all-reduced across the D ÷ S groups
  (FSDP2's HSDP, DeepSpeed's MiCS hierarchical all-reduce);
- **ZeRO++ hpZ** (stage 3): forward all-gathers the primary shards over D, backward the secondary ones
  within the hpz group (Wang et al., ZeRO++, §3.2);
- **reshard_after_forward 0** (stage 3, FSDP2's ``reshard_after_forward=False``): each unit stays gathered from its
  forward to its backward, so backward all-gathers nothing (torch 2.13 ``FSDPParamGroup.unshard`` returns at once
  for a group still unsharded);
- **expert parallelism**: the experts' collectives run over their D ÷ ep expert-data-parallel ranks.

Terms over the same group of ranks are summed before the one rounding up, so plain ZeRO is one ⌈…⌉.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.formula import Formula
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import shard

COLLECTIVES: dict[int, str] = {
    0: "all-reduce of gradients",
    1: "reduce-scatter of gradients + all-gather of updated parameters",
    2: "reduce-scatter of gradients + all-gather of updated parameters",
    3: "all-gather in forward + all-gather in backward + reduce-scatter of gradients",
}
EVIDENCE = "ring collectives send (D − 1) ÷ D of the buffer per pass (Rajbhandari et al., ZeRO, §7)"


@dataclass(frozen=True, slots=True)
class Term:
    """One collective's buffer per rank and the size of the group it runs over."""

    what: str
    buffer: int  # bytes per rank before the (G − 1) ÷ G factor
    group: int
    spelled: str  # the buffer as a formula, e.g. "2 × Ψ_p"
    across: bool = False  # across HSDP's replica groups: another group of ranks, even when of the same size

    @property
    def key(self) -> tuple[bool, int]:
        """Which group of ranks it runs over: terms over the same group share one rounding."""
        return self.across, self.group


@dataclass(frozen=True, slots=True)
class Communication:
    """One stage's collectives and their volume."""

    stage: int
    volume: int  # before the (G − 1) ÷ G factors
    bytes: int  # Σ over group sizes G of ⌈Σ buffers × (G − 1) ÷ G⌉
    scenario: Scenario
    terms: tuple[Term, ...] = ()

    @property
    def collectives(self) -> str:
        s = self.scenario
        text = COLLECTIVES[self.stage]
        if self.stage == 3 and s.hpz > 1:
            text = (f"all-gather in forward (over D) + all-gather in backward (within the hpZ group of {s.hpz}) + "
                    "reduce-scatter of gradients")  # fmt: skip
        elif self.stage == 3 and not s.reshard_after_forward:
            text = ("all-gather in forward (each unit then kept gathered into its backward: reshard_after_forward 0) "
                    "+ reduce-scatter of gradients")  # fmt: skip
        if self.stage >= 1 and _replicas(s) > 1:
            text += f" (within the shard group of {s.shard_group}) + all-reduce of the gradient shard across the "
            text += f"{_replicas(s)} groups"
        if s.ep > 1:
            text += f"; the experts' over their D ÷ ep = {s.dp // s.ep} ranks"
        if s.cp > 1:
            text += f"; over D × cp = {s.dp * s.cp} ranks (FSDP shards over the context-parallel ranks too)"
        if s.grad_accum > 1:
            text += f"; {s.grad_accum} micro batches a step: " + _per_micro_batch(s, self.stage)
        return text

    @property
    def evidence(self) -> str:
        return EVIDENCE

    @property
    def formula(self) -> Formula:
        groups = sorted({t.key for t in self.terms}, key=lambda k: (k[0], -k[1]))
        one_pass = self.scenario.grad_accum == 1
        if one_pass and groups == [(False, self.scenario.dp)]:  # every collective over the D ranks: the spec's
            s = self.scenario
            psi_p, psi_g = s.params * s.param_bytes, s.trainable_params * s.grad_bytes
            if self.stage == 0:
                terms = f"2 × Ψ_g = 2 × {n(psi_g)}"
            elif self.stage in (1, 2):
                terms = f"Ψ_g + Ψ_p = {n(psi_g)} + {n(psi_p)}"
            elif s.reshard_after_forward:
                terms = f"2 × Ψ_p + Ψ_g = 2 × {n(psi_p)} + {n(psi_g)}"
            else:  # no backward all-gather: units stay gathered from forward to backward
                terms = f"Ψ_p + Ψ_g = {n(psi_p)} + {n(psi_g)}"
            return Formula.of(f"⌈({terms}) × {n(s.dp - 1)} ÷ {n(s.dp)}⌉ = {n(self.bytes)} B")
        shown = []
        for key in groups:
            g = key[1]
            inner = " + ".join(f"{t.what} {t.spelled} = {n(t.buffer)}" for t in self.terms if t.key == key)
            shown.append(f"⌈({inner}) × {n(g - 1)} ÷ {n(g)}⌉")
        return Formula.of(" + ".join(shown) + f" = {n(self.bytes)} B")


def _replicas(s: Scenario) -> int:
    """HSDP's replica groups: D ÷ S."""
    return max(1, s.dp // s.shard_group)


def _syncs(s: Scenario) -> int:
    """How many times a step reduces its gradients: each micro batch (grad_sync every), or once (last: no sync until
    the last micro batch)."""
    return s.grad_accum if s.grad_sync == "every" else 1


def _per_micro_batch(s: Scenario, stage: int) -> str:
    """What gradient accumulation repeats: stage 3's all-gathers run in every micro batch's forward and backward; the
    gradients' collective each micro batch or once; the updated parameters' all-gather once."""
    syncs = _syncs(s)
    said = "each micro batch" if syncs > 1 else "once, after the last (no sync before)"
    gathers = "the all-gathers run in each micro batch, "
    if s.keeps_units_gathered:
        gathers = "the forward's all-gathers once (reshard_after_backward 0 keeps the units), the backward's each, "
    text = (gathers if stage == 3 else "") + f"the gradients are reduced {said}"
    return text + (", the updated parameters gathered once" if stage in (1, 2) else "")


def _times(k: int, spelled: str) -> str:
    return f"{k} × {spelled}" if k > 1 else spelled


def _terms(s: Scenario, stage: int) -> list[Term]:
    terms: list[Term] = []
    parts = s.shards()
    syncs, passes = _syncs(s), s.grad_accum  # gradient reductions and forward/backward passes per step
    forward = 1 if s.keeps_units_gathered else passes  # units kept after backward: gathered once
    for params, group in parts:
        # only what trains has a gradient to reduce (frozen parameters: one part, experts never split)
        psi_p, psi_g = params * s.param_bytes, (s.trainable_params if params == s.params else params) * s.grad_bytes
        tag = " (experts)" if group != parts[0][1] else ""  # the first part is the dense one
        p_, g_ = ("Ψ_p(experts)", "Ψ_g(experts)") if tag else ("Ψ_p", "Ψ_g")
        if stage == 0:
            # Plain data parallelism all-reduces over every data-parallel rank (the experts' over theirs), the
            # context-parallel ranks included: they hold the same parameters (torchtitan's loss mesh is batch × cp).
            terms.append(Term("all-reduce" + tag, syncs * 2 * psi_g, s.dp * s.cp if not tag else group,
                              _times(syncs, f"2 × {g_}")))  # fmt: skip
            continue
        gathered, first = _times(passes, p_), _times(forward, p_)
        if stage == 3 and s.hpz > 1:
            terms.append(Term("all-gather forward" + tag, forward * psi_p, s.dp, first))
            terms.append(Term("all-gather backward (hpZ)" + tag, passes * psi_p, s.hpz, gathered))
        elif stage == 3:
            terms.append(Term("all-gather forward" + tag, forward * psi_p, group, first))
            if s.reshard_after_forward:  # else FSDP2 keeps each unit gathered from its forward into its backward
                terms.append(Term("all-gather backward" + tag, passes * psi_p, group, gathered))
        terms.append(Term("reduce-scatter" + tag, syncs * psi_g, group, _times(syncs, g_)))
        if stage in (1, 2):
            terms.append(Term("all-gather" + tag, psi_p, group, p_))
    replicas = _replicas(s)
    if stage >= 1 and replicas > 1:
        grad_shard = shard(s.trainable_params, s.shard_group * s.cp) * s.grad_bytes  # the dense part's group
        trained = "N" if s.trainable_params == s.params else "T"  # T: the parameters that train
        spelled = _times(syncs, f"2 × ⌈{trained} ÷ {n(s.shard_group * s.cp)}⌉ × {s.grad_bytes} B")
        terms.append(Term("all-reduce of the gradient shard", syncs * 2 * grad_shard, replicas, spelled, across=True))
    return terms


def group_bytes(terms: tuple[Term, ...]) -> dict[tuple[bool, int], int]:
    """Bytes sent per rank over each group of ranks (:attr:`Term.key`): ⌈Σ buffers × (G − 1) ÷ G⌉, one rounding
    per group. Their sum is the stage's communication; the layout search times each group at its own link."""
    return {
        key: ceil_div(sum(t.buffer for t in terms if t.key == key) * (key[1] - 1), key[1])
        for key in {t.key for t in terms}
    }


def communication(s: Scenario, stage: int) -> Communication:
    terms = tuple(_terms(s, stage))
    total = sum(group_bytes(terms).values())
    return Communication(stage, sum(t.buffer for t in terms), total, s, terms)
