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

Each collective runs in its own width (torch 2.13 FSDP2: ``FSDPParam.all_gather_inputs`` casts the sharded parameter
to the ``param_dtype`` it all-gathers in, ``foreach_reduce`` reduce-scatters in ``reduce_dtype``): stage 3's
all-gathers at ``gather_bytes`` over the elements the parameters are stored in (a QLoRA base's packed codes), the
gradients' reduce-scatter and HSDP's all-reduce at ``reduce_bytes``, over what trains; stages 1–2 all-gather the
updated parameter copy at ``param_bytes``, stage 0 all-reduces at ``grad_bytes``. With the spec's defaults
(gather = parameter width, reduce = gradient width) this is the spec's table.

With a model (tp = pp = 1), stage 3's all-gathers follow the units as the walk does, each traced on the real code
(FSDP2's collectives counted on a fake process group, ``tests/trace/test_collectives_traced.py``): the root recipe's
root stays unsharded from its forward into its backward (torch 2.13 ``FSDPState._lazy_init``: the root does not
reshard after forward), so backward all-gathers the layers only; Accelerate's carved units all-gather everything again
in backward (the tail once more for the final norm, after the head's post-backward resharded it), and a tied model's
single tail unit, or torchtitan's chunked loss (``lm_head.unshard()`` after the forward resharded it), all-gathers
the tail a further time; backward all-gathers the layers a gradient reaches and the one below, prefetched. With
``reshard_after_forward`` 0 the tail is still all-gathered again after its own post-backward, and the chunked loss's
root callback (after each slice's backward) reshards every unit.

Terms over the same group of ranks are summed before the one rounding up, so plain ZeRO is one ⌈…⌉.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.formula import Formula
from app.ledger.models.defaults import ModelDefaults
from app.ledger.scenario import Scenario
from app.ledger.state.gathered import Units, units
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
            text = "all-gather in forward (each unit then kept gathered into its backward: reshard_after_forward 0) "
            if any(t.what.startswith("all-gather backward") for t in self.terms):  # gathered again all the same
                whose = (
                    "every unit (the chunked loss's root callback resharded them)"
                    if s.loss == "chunked"
                    else ("the tail, after its own post-backward resharded it")
                )
                text += f"+ all-gather in backward of {whose} "
            text += "+ reduce-scatter of gradients"
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
        group = _padded_to(self.scenario, self.stage)
        if not group:
            return EVIDENCE
        return (
            f"{EVIDENCE}; FSDP2 pads each parameter's dim 0 to a multiple of the {n(group)} ranks it shards "
            "over, and its collectives move the padded shards (torch 2.13 foreach_all_gather, foreach_reduce)"
        )

    @property
    def formula(self) -> Formula:
        groups = sorted({t.key for t in self.terms}, key=lambda k: (k[0], -k[1]))
        s = self.scenario
        widths = _widths(s, self.stage)
        if self._spec_shaped(groups):  # every collective over the D ranks, each unit alike: the spec's
            psi_p = next((t.buffer for t in self.terms if t.spelled == "Ψ_p"), 0)
            psi_g = next(t.buffer for t in self.terms if t.spelled != "Ψ_p") // (2 if self.stage == 0 else 1)
            if self.stage == 0:
                terms = f"2 × Ψ_g = 2 × {n(psi_g)}"
            elif self.stage in (1, 2):
                terms = f"Ψ_g + Ψ_p = {n(psi_g)} + {n(psi_p)}"
            elif len(self.terms) == 3:
                terms = f"2 × Ψ_p + Ψ_g = 2 × {n(psi_p)} + {n(psi_g)}"
            else:  # no backward all-gather: units stay gathered from forward to backward
                terms = f"Ψ_p + Ψ_g = {n(psi_p)} + {n(psi_g)}"
            return Formula.of(f"⌈({terms}) × {n(s.dp - 1)} ÷ {n(s.dp)}⌉ = {n(self.bytes)} B{widths}")
        shown = []
        for key in groups:
            g = key[1]
            inner = " + ".join(f"{t.what} {t.spelled} = {n(t.buffer)}" for t in self.terms if t.key == key)
            shown.append(f"⌈({inner}) × {n(g - 1)} ÷ {n(g)}⌉")
        return Formula.of(" + ".join(shown) + f" = {n(self.bytes)} B{widths}")

    def _spec_shaped(self, groups: list[tuple[bool, int]]) -> bool:
        """Whether the terms are the spec's table: one pass, every collective over the D ranks, each spelled with
        Ψ_p and Ψ_g alone (every unit all-gathered alike)."""
        plain = self.scenario.grad_accum == 1 and groups == [(False, self.scenario.dp)]
        return plain and all(t.spelled in ("Ψ_p", "Ψ_g", "2 × Ψ_g") for t in self.terms)


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


def _widths(s: Scenario, stage: int) -> str:
    """What Ψ_p and Ψ_g count where it is not the spec's N × param_bytes and N × grad_bytes ("" where it is)."""
    if stage == 0 or (stage in (1, 2) and s.reduce_bytes == s.grad_bytes and s.trainable_params == s.params):
        return ""
    said = []
    if stage == 3 and (s.gather_bytes != s.param_bytes or s.base_quant != "none"):
        stored = "the stored elements (a 4-bit base's packed codes)" if s.base_quant != "none" else "N"
        said.append(f"Ψ_p = {stored} × {s.gather_bytes} B, the all-gather width")
    if s.reduce_bytes != s.grad_bytes or s.trainable_params != s.params:
        trained = "N" if s.trainable_params == s.params else "T, what trains,"
        said.append(f"Ψ_g = {trained} × {s.reduce_bytes} B, the reduce-scatter width")
    return f" ({'; '.join(said)})" if said else ""


def _padded_to(s: Scenario, stage: int) -> int:
    """The shard group whose multiple stage 3's units are padded to on dim 0, where that adds anything; else 0."""
    (params, group), md = s.shards()[0], _unit_model(s)
    whole = params == s.params  # one part: the terms follow the units (not with expert parallelism's two)
    if stage == 3 and whole and md is not None and s.base_quant == "none" and units(s, md, group).padded:
        return group
    return 0


Gathered = tuple[int, str]  # elements all-gathered in one pass, and how the formula spells them


def _unit_model(s: Scenario) -> ModelDefaults | None:
    """The model whose units stage 3's collectives follow: one with its whole layer structure on the rank (tp = pp
    = 1), else None (each unit all-gathered twice, as the spec's table has it)."""
    return s.model_defaults() if s.tp == 1 and s.pp == 1 else None


def _units(s: Scenario, stored: int, el: Units | None) -> tuple[Gathered, Gathered, int]:
    """(what each forward all-gathers, what each backward all-gathers again of the units resharded after forward,
    the elements a unit's own post-backward resharded and a later backward gathers again) at stage 3: everything,
    everything and nothing; or with a model (tp = pp = 1, ``el`` its units) as its units are (the module docstring)."""
    md = _unit_model(s)
    if md is None or el is None:
        return (stored, "Ψ_p"), (stored, "Ψ_p"), 0
    tied, carved, peft = md.model.architecture.tied_embeddings, s.wrap == "embed-tail", md.lora is not None
    # a tied model's one tail unit is all-gathered for the embedding and again for the head (under PEFT, whose
    # wrapper hides the final norm from the carve, the unit holds the embedding alone); torchtitan's chunked loss
    # all-gathers its tail again after the forward resharded it
    extra = (el.embed if peft else el.outside) if tied else el.final if s.loss == "chunked" else 0
    ahead = (stored + extra, "(Ψ_p + Ψ_tail)") if carved and extra else (stored, "Ψ_p")
    layers, first = _layers_back(s, md, el)
    below = el.embed if first == 0 else 0  # layer 0's backward runs and prefetches the embedding's unit
    if not carved:  # the root recipe's root stays unsharded from its forward into its backward
        return ahead, (layers, "(Ψ_p − Ψ_root)"), 0
    if tied:  # the tail unit, resharded by the head's post-backward, prefetched by layer 0 (not under PEFT: the head's
        # use, last in forward, orders it last)
        return ahead, (layers, "Ψ_layers"), 0 if peft or not below else el.outside
    if peft:  # the head alone, kept from forward; the norm in the root
        return ahead, (layers + below, "(Ψ_p − Ψ_tail)"), 0
    # the tail again for the final norm, after the head's post-backward resharded it
    return ahead, (layers + below, "(Ψ_p − Ψ_tail)"), el.final


def _tail_reduced_again(s: Scenario, el: Units) -> int:
    """Elements Accelerate's carved tail reduce-scatters a second time in the last micro batch when accumulating
    without sync: its group runs a post-backward per module, the first reduce-scatters every accumulated gradient of
    the unit, the second what has a gradient again — the final norm's, or a tied unit's embedding and norm (traced,
    ``tests/trace/test_collectives_traced.py``)."""
    md = _unit_model(s)
    if md is None or s.wrap != "embed-tail" or md.lora is not None or not s.accumulates_unsharded(3):
        return 0
    tied = md.model.architecture.tied_embeddings
    return el.embed + el.final_norm if tied and not s.freeze_embed else el.final_norm


def _layers_back(s: Scenario, md: ModelDefaults, el: Units) -> tuple[int, int]:
    """(the decoder layers' stored elements all-gathered in backward, the first layer whose backward runs): those a
    gradient reaches (every layer with LoRA's adapters, else from the first trained one up, or all when the
    embedding trains) and the one below the lowest of them, which its backward prefetches (FSDP2's implicit backward
    prefetch, torch 2.13 ``FSDPParamGroup._backward_prefetch``)."""
    layers = md.model.architecture.layers
    first = 0 if md.lora is not None or not s.freeze_embed else s.frozen_layers
    low = max(0, first - 1)
    packed = (md.quant.values - md.quant.storage) // layers if md.quant is not None else 0  # a 4-bit base's saving
    total = 0
    for start, count, each in el.layers:
        total += (start + count - max(low, start) if start + count > low else 0) * (each - packed)
    return total, first


def _gathers(s: Scenario, tag: str, group: int, stored: int, units: tuple[Gathered, Gathered, int]) -> list[Term]:
    """Stage 3's all-gathers per step: each forward's (once with units kept gathered between micro batches), each
    backward's of the units resharded after forward (none with ``reshard_after_forward`` 0, unless the chunked loss's
    root callback resharded them all), and the tail's again after its own post-backward (each micro batch that
    reshards after backward: the last only when units are kept between them)."""
    ahead, back, tail = units
    passes, hpz = s.grad_accum, s.hpz > 1
    forward = 1 if s.keeps_units_gathered else passes
    tails = 1 if s.keeps_units_gathered else passes
    backward = passes if s.reshard_after_forward or s.loss == "chunked" else 0
    out = [Term("all-gather forward" + tag, forward * ahead[0] * s.gather_bytes, s.dp if hpz else group,
                _times(forward, ahead[1]))]  # fmt: skip
    where = ("all-gather backward" + (" (hpZ)" if hpz else "") + tag, s.hpz if hpz else group)
    if tail and backward == tails:  # one term: every backward all-gathers both
        whole = back[0] + tail
        spelled = "Ψ_p" if whole == stored else f"({back[1]} + Ψ_tail)"
        return [*out, Term(where[0], backward * whole * s.gather_bytes, where[1], _times(backward, spelled))]
    if backward:
        out.append(Term(where[0], backward * back[0] * s.gather_bytes, where[1], _times(backward, back[1])))
    if tail:
        out.append(
            Term(where[0] + " (the tail again)", tails * tail * s.gather_bytes, where[1], _times(tails, "Ψ_tail"))
        )
    return out


def _terms(s: Scenario, stage: int) -> list[Term]:
    terms: list[Term] = []
    parts = s.shards()
    syncs = _syncs(s)  # gradient reductions per step
    dense_trained = 0  # stage 3 with a model: what the dense part reduce-scatters, padded
    for params, group in parts:
        tag = " (experts)" if group != parts[0][1] else ""  # the first part is the dense one
        # only what trains has a gradient to reduce (frozen parameters: one part, experts never split); the stored
        # elements: a 4-bit base's packed codes for its frozen linear weights
        whole = params == s.params
        md = _unit_model(s) if whole and stage == 3 else None
        # FSDP2's padded units (a 4-bit base's packed codes are counted unpadded)
        el = units(s, md, group if s.base_quant == "none" else 1) if md is not None else None
        trained = el.trained if el is not None else s.trainable_params if whole else params
        dense_trained = el.trained if el is not None else dense_trained
        stored = el.stored if el is not None else params
        stored += s.frozen_elements - s.frozen_params if whole else 0
        p_, g_ = ("Ψ_p(experts)", "Ψ_g(experts)") if tag else ("Ψ_p", "Ψ_g")
        if stage == 0:
            # Plain data parallelism all-reduces over every data-parallel rank (the experts' over theirs), the
            # context-parallel ranks included: they hold the same parameters (torchtitan's loss mesh is batch × cp).
            terms.append(Term("all-reduce" + tag, syncs * 2 * trained * s.grad_bytes, s.dp * s.cp if not tag else group,
                              _times(syncs, f"2 × {g_}")))  # fmt: skip
            continue
        if stage == 3:
            gathered = _units(s, stored, el) if whole else ((stored, p_), (stored, p_), 0)
            terms += _gathers(s, tag, group, stored, gathered)
        again = _tail_reduced_again(s, el) if el is not None else 0
        terms.append(Term("reduce-scatter" + tag, (syncs * trained + again) * s.reduce_bytes, group,
                          _times(syncs, g_) + (" + Ψ_g(tail again)" if again else "")))  # fmt: skip
        if stage in (1, 2):
            terms.append(Term("all-gather" + tag, params * s.param_bytes, group, p_))
    replicas = _replicas(s)
    if stage >= 1 and replicas > 1:
        # the dense part's group; at stage 3 the padded shard its reduce-scatter leaves
        reduced = dense_trained if stage == 3 and dense_trained else s.trainable_params
        grad_shard = shard(reduced, s.shard_group * s.cp) * s.reduce_bytes
        trained_ = "N" if s.trainable_params == s.params else "T"  # T: the parameters that train
        spelled = _times(syncs, f"2 × ⌈{trained_} ÷ {n(s.shard_group * s.cp)}⌉ × {s.reduce_bytes} B")
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
