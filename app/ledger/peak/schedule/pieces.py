"""What every instant of one step reads, and the pieces of the step that several instants share.

:class:`Pieces` is made once per (scenario, stage, rules): the model's units at D (:mod:`.layout`), the
activation terms (:mod:`.terms`), the stage's persistent lines and the widths. Its methods each put one
kind of resident memory into a sink (:mod:`.sinks`) with its formula: the model state, the gradients so
far, unsharded units, saved activations (scaled by a measured figure, divided by a mutant), the declared
buckets and overhead. The instants themselves are :class:`app.ledger.peak.schedule.step.Step`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from app.ledger.arithmetic import ceil_div, n
from app.ledger.models.fsdp2 import experts_dim
from app.ledger.models.reference import resolve
from app.ledger.peak.schedule.layout import Layout, layout
from app.ledger.peak.schedule.micro import MicroBatches
from app.ledger.peak.schedule.sinks import Sink
from app.ledger.peak.schedule.terms import activation_terms
from app.ledger.peak.schedule.trained import gathered_layout, trained_layout
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import LedgerLine, shard
from app.ledger.state.rules import Rules

COMPLEX64 = 8  # bytes per element of a complex64 tensor (two FP32)


def _times(formula: Callable[[], str], measured: int, modelled: int, value: int) -> Callable[[], str]:
    """A modelled activation's formula scaled by a typed measurement (measured ÷ modelled) to ``value``."""
    return lambda: f"⌈({formula()}) × {n(measured)} ÷ {n(modelled)}⌉ (measured ÷ modelled) = {n(value)} B"


def _divided(formula: Callable[[], str], dp: int, value: int) -> Callable[[], str]:
    """The divide-activations-by-dp mutant's formula: ``formula`` ÷ D = ``value``."""
    return lambda: f"({formula()}) ÷ {n(dp)} = {n(value)} B"


class Pieces(MicroBatches):
    def __init__(self, s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, padded: bool) -> None:
        self.s, self.stage, self.rules, self.lines = s, stage, rules, lines
        # FSDP shards over D × cp (torchtitan 0.3.0: dp_shard × cp), and each rank holds s ÷ cp of the sequence
        self.mesh = s.dp * s.cp
        self.seq = n(s.seq_len) if s.cp == 1 else f"({n(s.seq_len)} ÷ {s.cp})"
        self.fsdp2 = stage == 3
        arch = resolve(s.model).architecture
        base = layout(s.model, self.mesh, padded, s.base_quant, experts_dim(arch, s.stack, self.mesh))
        md = s.model_defaults() if s.lora_rank else None
        self.u = gathered_layout(base, md.lora if md is not None else None, self.mesh, padded)
        self.g = self._trained(padded)  # what trains of each unit: the gradient terms read it (.trained)
        self.a = activation_terms(s)
        # Everything below is the same at every instant: worked out once here, not once per instant.
        grad = next(line for line in lines if line.tensor_class == "gradients")
        self.grad_line = grad
        self.grads_width, self.gather, self.reduce = grad.width, s.gather_bytes, s.reduce_bytes
        self.state_lines = [ln for ln in lines if ln.tensor_class != "gradients" and ln.bytes]
        self.state_total = sum(ln.bytes for ln in self.state_lines)
        # bytes per element of the sharded non-gradient classes: what stage 3's dim-0 padding costs
        self.state_width = sum(ln.width * ln.copies for ln in lines if ln.tensor_class != "gradients" and ln.sharded)
        stored = s.trainable_params + s.frozen_elements  # the parameters' elements (a 4-bit base's packed)
        self.padding = max(0, self.u.padded_total - shard(stored, self.mesh)) if self.fsdp2 else 0
        # the trained parameters' padding, which their gradients carry (the same as the model's when all train)
        self.grad_padding = max(0, self.g.padded_total - shard(s.trainable_params, self.mesh)) if self.fsdp2 else 0
        self.layer_grad = self._grad_elements(self.g.layer_params, self.g.layer_shard)
        # deepseek_v3's dense layers, or the frozen first layers
        self.dense_grad = self._grad_elements(self.g.dense_params, self.g.dense_shard)
        self.head_grad = self._grad_elements(self.g.head_grad_params, None)
        self.buffers = self._buffers()
        md = s.model_defaults() if s.base_quant != "none" else None
        self.quant = md.quant if md is not None else None
        self.init_micro_batches(stage)  # gradient accumulation: see .micro
        self.scale: tuple[int, int] | None = None
        if s.source_of("activation_bytes") == "measured":
            self.scale = (s.activation_bytes, self.a.modelled_total)

    def _trained(self, padded: bool) -> Layout:
        s = self.s
        if s.trainable_params == s.params:
            return self.u
        md = s.model_defaults()
        assert md is not None  # the schedule is walked with a model only
        return trained_layout(
            self.u, s.model, md.lora, s.frozen_layers, bool(s.freeze_embed), md.frozen_modules, self.mesh, padded
        )

    def _buffers(self) -> tuple[int, str]:
        """Registered buffers every rank holds whole (FSDP2 shards parameters only): torchtitan's RoPE caches,
        one complex64 (8 B) tensor of seq_len × head_dim ÷ 2 per layer; (bytes, formula)."""
        if self.s.buffers != "rope-per-layer":
            return 0, ""
        md = self.s.model_defaults()  # cached per query, as the activation terms are
        assert md is not None  # the schedule is walked with a model only
        layers, d = self.u.layers, md.model.architecture.head_dim
        value = layers * self.s.seq_len * (d // 2) * COMPLEX64
        return value, f"{layers} layers × {n(self.s.seq_len)} × ({d} ÷ 2) × {COMPLEX64} B = {n(value)} B"

    def _grad_elements(self, params: int, fsdp2_shard: int | None) -> int:
        """One unit's gradient elements on this rank: FSDP2's padded shard, ⌈params ÷ D⌉, or whole."""
        if not self.grad_line.sharded:
            return params
        if self.fsdp2 and fsdp2_shard is not None:
            return fsdp2_shard
        return shard(params, self.mesh)

    def state(self, out: Sink) -> None:
        lines, total = self.state_lines, self.state_total
        out.add(
            "state",
            "parameters, master weights and optimizer states (the persistent lines)",
            total,
            lambda: " + ".join(f"{n(ln.bytes)} B {ln.tensor_class}" for ln in lines) + f" = {n(total)} B",
        )
        quant = self.quant
        if quant is not None:
            out.add("state", "the 4-bit base's quant states (absmaxes and code tables: module attributes, not sharded)",
                    quant.state_bytes, lambda: quant.formula)  # fmt: skip
        buffers, buffers_formula = self.buffers
        if buffers:
            out.add("state", "RoPE caches (a complex64 buffer per layer; buffers are not sharded)", buffers,
                    lambda: buffers_formula)  # fmt: skip
        if self.fsdp2 and self.g is not self.u:
            self._trained_state_padding(out)
        elif self.fsdp2:
            u, s, width, pad, mesh = self.u, self.s, self.state_width, self.padding, self.mesh
            out.add(
                "state",
                "FSDP2 dim-0 padding of those shards",
                pad * width,
                lambda: (
                    f"({n(u.padded_total)} − ⌈{n(s.params)} ÷ {n(mesh)}⌉) elements × {width} B = {n(pad * width)} B"
                ),
            )

    def _trained_state_padding(self, out: Sink) -> None:
        """Part of the model trains: the trained parameters' padding in the widths of the lines that hold them (the
        parameters', master copy, optimizer states), the frozen ones' in the frozen width."""
        trained, frozen = self.grad_padding, max(0, self.padding - self.grad_padding)
        lines = [ln for ln in self.lines if ln.tensor_class != "gradients" and ln.sharded]
        width = sum(ln.width * ln.copies for ln in lines if ln.params != self.s.params or ln.frozen)
        whole = sum(ln.width * ln.copies for ln in lines if ln.params == self.s.params and not ln.frozen)
        frozen_width = whole + sum(ln.frozen_width for ln in lines if ln.frozen)
        value = trained * (width + whole) + frozen * frozen_width
        out.add("state", "FSDP2 dim-0 padding of those shards (trained, frozen)", value,
                lambda: f"{n(trained)} elements × {width + whole} B + {n(frozen)} elements × {frozen_width} B "
                f"= {n(value)} B")  # fmt: skip

    def declared(self, out: Sink) -> None:
        s = self.s
        out.add("buckets", "communication buckets (declared)", s.bucket_bytes, lambda: f"{n(s.bucket_bytes)} B")
        out.add("overhead", "runtime overhead (declared)", s.overhead_bytes, lambda: f"{n(s.overhead_bytes)} B")

    def all_gradients(self) -> tuple[int, Callable[[], str]]:
        """Every gradient, as after backward: the gradient line (+ its FSDP2 padding when sharded)."""
        line = self.grad_line
        pad = self.grad_padding * line.width * line.copies if line.sharded else 0
        total = line.bytes + pad
        if pad:
            return total, lambda: f"{line.formula.text} + FSDP2 padding {n(pad)} B = {n(total)} B"
        return total, lambda: line.formula.text

    def gradients_so_far(self, out: Sink, layers_done: int, head_done: bool, what: str) -> None:
        if self.sync_last:
            self.accumulated_gradients(out, self.done_params(layers_done, head_done, self.g.head_grad_params))
        if self.shards_all or not self.rules.gradients_fill_during_backward:
            total, formula = self.all_gradients()
            why = (f"every gradient (accumulated since the first of {self.s.grad_accum} micro batches)"
                   if self.shards_all else "every gradient (kept resident through the step)")  # fmt: skip
            out.add("gradients", why, total, formula)
            return
        if not self.reducing:  # no micro batch before the last reduce-scatters: no gradient shard yet
            return
        per_layer, dense = self.layer_grad, self.g.last_dense(layers_done)  # the top layers_done layers
        head = self.head_grad if head_done else 0
        # Offloaded (copies 0): each unit's gradients go to the host once reduced; none stay resident here.
        w = self.grads_width * self.grad_line.copies
        value = ((layers_done - dense) * per_layer + dense * self.dense_grad + head) * w
        out.add(
            "gradients",
            what,
            value,
            lambda: (
                f"({layers_done - dense} × {n(per_layer)}"
                + (f" + {dense} × {n(self.dense_grad)}" if dense else "")
                + (f" + {n(head)}" if head else "")
                + f") elements × {w} B = {n(value)} B"
            ),
        )

    def unit_post_backward(self, out: Sink, params: int, fresh: Callable[[Sink], None]) -> None:
        """A unit's whole gradient at its post-backward (``fresh`` puts it): held, but in the last micro batch without
        sync, which has added it into the accumulated one and freed it (torch 2.13 FSDPParam.
        accumulate_unsharded_grad_if_needed); the first without sync makes its copy in the reduce width beside it
        (to_accumulated_grad_if_needed, where the reduce width is not the gather width)."""
        if not (self.sync_last and self.is_last):
            fresh(out)
        if self.sync_last and not self.after_first and self.reduce != self.gather:
            self.accumulated_gradients(out, params)

    def kept_since_backward(self, out: Sink, lo: int, forward: bool = False) -> None:
        """reshard_after_backward 0: layers lo … L − 1 unsharded since their backward, this micro batch's (a micro
        batch but the last) or, in ``forward``, the last one's."""
        last = self.u.layers - 1
        if (self.keeps_forward if forward else self.keeps_backward) and lo <= last:
            what = f"layer {lo}" if lo == last else f"layers {lo} … {last}"
            self.unsharded_layers(out, f"{what} kept unsharded since their backward (reshard_after_backward 0)", lo,
                                  last + 1)  # fmt: skip

    def unsharded_layers(self, out: Sink, what: str, lo: int, hi: int, category: str = "unsharded_params") -> None:
        """Layers lo … hi − 1 unsharded (or their all-gather outputs): one entry, its runs of alike layers summed."""
        runs = self.u.runs(lo, hi)
        if len(runs) < 2:
            for count, whole in runs:
                self.unsharded(out, what, count, whole, category)
            return
        if not (self.fsdp2 and self.rules.gather_peak):
            return
        g = self.gather
        value = sum(count * whole for count, whole in runs) * g
        text = " + ".join(f"{count} × {n(whole)}" for count, whole in runs)
        out.add(category, what, value, lambda: f"({text}) elements × {g} B = {n(value)} B")

    def unsharded(self, out: Sink, what: str, units: int, whole: int, category: str = "unsharded_params") -> None:
        """``units`` unsharded units of ``whole`` elements each (padding included) in the gather width."""
        if not (self.fsdp2 and self.rules.gather_peak) or units == 0:
            return
        g = self.gather
        value = units * whole * g
        out.add(
            category,
            what,
            value,
            lambda: (f"{units} × " if units > 1 else "") + f"{n(whole)} elements × {g} B = {n(value)} B",
        )

    def in_flight(self, out: Sink) -> None:
        """What the layer whose backward runs holds besides its activations: with context parallelism ring
        attention's all-gathered K and V (its backward builds the rotater again), with a 4-bit base the weight it
        multiplies by, dequantized whole to the compute width (bitsandbytes' MatMul4Bit; the largest counted)."""
        a, s = self.a, self.s
        if a.ring_kv:
            out.add("temporaries", f"ring attention's K and V, all-gathered over the {s.cp} cp ranks, and its send "
                    "buffer", a.ring_kv, lambda: f"({s.cp} + 1) × 2·(s ÷ cp)·b·kv·d × {s.act_bytes} B = "
                    f"{n(a.ring_kv)} B")  # fmt: skip
        if self.quant is None:
            return
        values, w = self.quant.largest, self.s.act_bytes
        out.add("temporaries", "the largest 4-bit weight dequantized for its matmul", values * w,
                lambda: f"{n(values)} values × {w} B = {n(values * w)} B")  # fmt: skip

    def activations(self, out: Sink, what: str, value: int, formula: Callable[[], str]) -> None:
        # A typed measurement scales the modelled figure first; the mutant then divides what the rank holds
        # (the user's figure, as the declared peak's mutant does), so with a measured 0 it is equivalent.
        if self.scale is not None:
            measured, modelled = self.scale
            scaled = ceil_div(value * measured, modelled)
            value, formula = scaled, _times(formula, measured, modelled, scaled)
        if self.rules.activations_divided_by_dp:
            divided = value // self.s.dp
            value, formula = divided, _divided(formula, self.s.dp, divided)
        out.add("activations", what, value, formula)

    def reduce_scatter_input(self, out: Sink, what: str, params: int, whole: int) -> None:
        """The reduce-scatter input of a unit: at stage 3 FSDP2's whole padded unit, at stage 2 the unit."""
        if self.stage < 2 or not self.rules.reduce_scatter_buffer or not self.reducing:
            return
        r = self.reduce
        elements = whole if self.fsdp2 else params
        value = elements * r
        out.add("reduce_scatter", what, value, lambda: f"{n(elements)} elements × {r} B = {n(value)} B")

    def root_and_kept_layers(self, out: Sink, kept_layers: int) -> None:
        self.unsharded(
            out,
            "root unit unsharded (embedding, final norm, head: FSDP2 keeps it from forward to its post-backward)",
            1,
            self.u.root_unsharded,
        )
        if kept_layers:
            self.unsharded_layers(out, "layers kept unsharded after forward (reshard_after_forward = 0)", 0,
                                  kept_layers)  # fmt: skip

    def kept_after_forward(self) -> int:
        return self.u.layers if self.fsdp2 and not self.s.reshard_after_forward else 0

    def saved_through_forward(self) -> tuple[int, Callable[[], str]]:
        a, layers = self.a, self.u.layers
        value = a.saved_before(layers) + a.extra_residual + a.head
        return (
            value,
            lambda: (
                (
                    f"{layers} layers × {n(a.per_layer)} B"
                    if a.every == 1 and not (a.alt_every or a.alt_first)
                    else f"layers {a.saved_formula(layers)}"
                )
                + f" + residual {n(a.extra_residual)} B + head input {n(a.head)} B"
                f" = {n(value)} B"
            ),
        )

    def activation_grad_formula(self) -> str:
        """s·b·h in the activation width: the hidden state entering a layer, the gradient leaving it."""
        return f"s·b·h × {self.s.act_bytes} B = {n(self.a.activation_grad)} B"

    def whole_gradients(self, out: Sink, what: str, elements: int) -> None:
        """Whole (unsharded) gradients of ``elements``: in the gather width at stage 3 (FSDP2 computes them in
        the parameters' unsharded dtype), else in the gradient line's width; they wait for a reduce-scatter
        when the gradients are sharded, else they are the rank's gradients."""
        width = self.gather if self.fsdp2 else self.grads_width
        value = elements * width
        category = "unsharded_grads" if self.fsdp2 or self.grad_line.sharded else "gradients"
        out.add(category, what, value, lambda: f"{n(elements)} elements × {width} B = {n(value)} B")
