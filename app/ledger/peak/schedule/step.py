"""The instants of one training step, in step order, each written once.

Each method of :class:`Step` puts what is resident at one instant into a sink (:mod:`.sinks`), after the
model state and before the declared buckets and overhead, which every instant holds: the sum-only sink
for the numbers, the entry-keeping one to spell them. :meth:`Step.plan` lists the instants a
stage walks, with their keys and names; :mod:`.walk` runs it. See the package's docstring for what each
instant holds and why.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial
from typing import NamedTuple

from app.ledger.arithmetic import n
from app.ledger.peak.schedule.pieces import Pieces
from app.ledger.peak.schedule.sinks import Sink
from app.ledger.state.persistent import shard


class Moment(NamedTuple):
    """One instant of the plan: its key, name and phase (see :class:`Instant`) and what fills it besides
    what is resident at every instant (the model state, the declared buckets and overhead: see
    :mod:`.walk`)."""

    key: str
    name: str
    phase: str
    fill: Callable[[Sink], None]


@lru_cache(maxsize=4096)  # the same few names for every schedule of a model: spelled once
def _layer_name(k: int, last: int, moment: str) -> tuple[str, str]:
    name = f"backward at layer {k}" + (" (the last)" if k == last else " (the first)" if k == 0 else "")
    key, tail = {"unshard": ("-unshard", ": all-gather copy-out"), "early": ("", ""), "late": ("-done", ": done")}[
        moment
    ]
    return f"backward-layer-{k}{key}", name + tail


class Step(Pieces):
    # ------------------------------------------------------------------ the plan
    def moments(self) -> list[Moment]:
        """The plan, each instant walked for the worst micro batch (:meth:`MicroBatches.worst`)."""
        if len(self.roles) == 1:  # one micro batch: the plan as it is (the fit finder walks hundreds)
            return self.plan()
        return [m._replace(fill=self.worst(m.fill)) for m in self.plan()]

    def plan(self) -> list[Moment]:
        """The stage's instants in step order."""
        plan = [
            Moment(f"forward-layer-{k}", f"forward at layer {k}", "forward", partial(self.forward_at, k))
            for k in self.forward_layers()
        ]
        plan += [
            Moment("end-of-forward", "end of forward", "forward", self.end_of_forward),
            Moment("loss-backward", "loss backward", "loss", self.loss_backward),
            Moment("head-backward", "backward at the head", "backward", self.head_backward),
        ]
        plan += [m for k in self.candidate_layers() for m in self.layer_moments(k)]
        if self.stage >= 2:
            plan += [
                Moment("root-gradients", "backward at the embedding (root gradients computed)", "backward",
                       self.root_gradients),
                Moment("root-post-backward", "root post-backward", "backward", self.root_post_backward),
            ]  # fmt: skip
        plan.append(Moment("optimizer-step", "optimizer step", "optimizer", self.optimizer_step))
        return plan

    def forward_layers(self) -> list[int]:
        """Stage 3's forward unshards worth walking: layer 0 (the root's all-gather output still held)
        and the two ends of the linear stretch 1 … L − 1; stages 0–2 gather nothing in forward, and the
        end of forward holds more than any layer's forward there."""
        if not self.fsdp2:
            return []
        return sorted(
            {0, min(1, self.u.layers - 1), self.u.layers - 1} | {k for k in self.kind_edges() if 0 <= k < self.u.layers}
        )

    def candidate_layers(self) -> list[int]:
        """Layers whose backward instant can be the worst, last first: between max(1, P) and L − 2 the
        total is linear in k (each layer adds its shard of gradients and removes its activations), so
        only the ends and the layers whose prefetch is cut short by the start of the model remain."""
        last = self.u.layers - 1
        head = {last, last - 1}
        early = set(range(min(max(1, self.s.prefetch), last) + 1))
        # every N-th layer checkpointed: the total is no longer linear between the ends (a checkpointed layer
        # rebuilds its set, an other frees a whole one), so each checkpointed layer and the one above it is walked
        every = self.a.every
        spikes = {j for k in range(0, last + 1, every) for j in (k, k + 1) if j <= last} if every > 1 else set()
        return sorted((k for k in head | early | spikes | self.kind_edges() if 0 <= k <= last), reverse=True)

    def kind_edges(self) -> set[int]:
        """The layers either side of where deepseek_v3's dense layers or the frozen first layers end (the total
        steps there, as a layer's size, gradients and saved set change), each walked."""
        k = self.g.dense_layers  # what trains: the frozen first layers are its dense ones
        return {k - 2, k - 1, k, k + 1} if k else set()

    def layer_moments(self, k: int) -> list[Moment]:
        """Layer k's backward, in order: its all-gather copy-out (stage 3 resharding after forward, D > 1:
        its own all-gather output beside its unsharded parameters, nothing computed yet), early (every
        activation of the layer still saved, the MLP's first gradients and its output projection's weight
        gradient computed) and late (the layer's activations freed, all its weight gradients computed)."""
        unshard = self.fsdp2 and self.s.reshard_after_forward and self.mesh > 1
        moments = ("unshard", "early", "late") if unshard else ("early", "late")
        last = self.u.layers - 1
        return [
            Moment(*_layer_name(k, last, moment), "backward", partial(self.backward_at, k, moment))
            for moment in moments
        ]

    # ------------------------------------------------------------------ forward
    def forward_at(self, k: int, out: Sink) -> None:
        """Layer k's forward unshard (the all-gather copy-out): its all-gather output beside its unsharded
        parameters, the previous unit's all-gather output still held (FSDP2 frees it after this copy-out),
        the activations of the layers before it and the hidden state entering it."""
        u, a, s = self.u, self.a, self.s
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self.root_and_kept_layers(out, k if not s.reshard_after_forward else 0)
        self.unsharded(out, f"layer {k} unsharded", 1, u.unsharded_of(k))
        self.kept_since_backward(out, k + 1, forward=True)
        if self.mesh > 1 and not self.keeps_forward:  # kept since the last micro batch: no all-gather
            self.unsharded(out, f"layer {k}'s all-gather output (during its copy-out)", 1, u.unsharded_of(k),
                           "all_gather")  # fmt: skip
            held, whole = self.first_unit() if k == 0 else (f"layer {k - 1}'s", u.unsharded_of(k - 1))
            self.unsharded(out, f"{held} all-gather output, held until this copy-out", 1, whole, "all_gather")
        saved = a.saved_before(k)
        self.activations(out, f"activations of layers 0 … {k - 1}" if k else "activations (none saved yet)",
                         saved, lambda: f"{a.saved_formula(k)} = {n(saved)} B")  # fmt: skip
        self.activations(out, f"the hidden state entering layer {k}", a.activation_grad, self.activation_grad_formula)

    def first_unit(self) -> tuple[str, int]:
        """The unit all-gathered before layer 0 in forward (whose output layer 0's copy-out frees), and its size."""
        return "the root's", self.u.root_unsharded

    def forward_done(self, out: Sink) -> None:
        """What the end of forward and the loss backward share: no gradients yet, the
        root (and with ``reshard_after_forward = 0`` every layer) unsharded, every saved activation."""
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self.root_and_kept_layers(out, self.kept_after_forward())
        value, formula = self.saved_through_forward()
        self.activations(
            out, "activations saved by every layer, the final norm and the residual stream", value, formula
        )

    def end_of_forward(self, out: Sink) -> None:
        self.forward_done(out)
        a, s = self.a, self.s
        self.activations(
            out,
            "logits (the head's output, in the activation width)",
            a.logits_out,
            lambda: (
                f"s·b·V × {s.act_bytes} B = {self.seq}·{s.micro_batch}·{n(a.vocab)} × "
                f"{s.act_bytes} B = {n(a.logits_out)} B"
            ),
        )

    def loss_backward(self, out: Sink) -> None:
        """The loss's backward. With the loss inside the model (``loss = inside``: transformers' ForCausalLM
        with labels=) it runs inside the root module, so the root's pre-backward has already prefetched
        the last layer(s) — where the root owns the head (``wrap = root``; under ``embed-tail`` the root owns
        no parameter and its pre-backward prefetches nothing)."""
        self.forward_done(out)
        a, s = self.a, self.s
        if s.loss == "inside" and s.wrap == "root":
            self.root_prefetch(out, " (the loss runs inside the root module)")
        self.activations(
            out,
            "the loss's saved log-probabilities (s·b·V in the loss width)",
            a.logits_saved,
            lambda: (
                f"s·b·V × {s.logits_bytes} B = {self.seq}·{s.micro_batch}·{n(a.vocab)} × "
                f"{s.logits_bytes} B = {n(a.logits_saved)} B"
            ),
        )
        out.add(
            "temporaries",
            "loss backward: the gradients of the log-probabilities and of the logits",
            a.loss_temporaries,
            lambda: f"2 × {self.seq}·{s.micro_batch}·{n(a.vocab)} × {s.logits_bytes} B = {n(a.loss_temporaries)} B",
        )

    # ------------------------------------------------------------------ backward
    def head_backward(self, out: Sink) -> None:
        """After the loss: the root's pre-backward prefetches the last layer(s), the head's matmul backward
        turns the logits' gradient into its weight's gradient and its input's."""
        self.gradients_so_far(out, 0, False, "gradients (none reduced yet)")
        self.root_and_kept_layers(out, self.kept_after_forward())
        self.root_prefetch(out)
        self.head_gradients(out)
        value, formula = self.saved_through_forward()
        self.activations(out, "activations saved by every layer, the final norm and the residual stream", value,
                         formula)  # fmt: skip
        self.head_backward_temporaries(out)

    def head_backward_temporaries(self, out: Sink) -> None:
        """The head's backward: the logits' gradient and the head input's."""
        a, s = self.a, self.s
        temps = a.logits_out + a.activation_grad
        out.add(
            "temporaries",
            "the logits' gradient (activation width) and the head input's gradient",
            temps,
            lambda: (
                f"s·b·V × {s.act_bytes} B = {n(a.logits_out)} B + s·b·h × {s.act_bytes} B = "
                f"{n(a.activation_grad)} B = {n(temps)} B"
            ),
        )

    def head_gradients(self, out: Sink) -> None:
        """The head's backward: the head's and the final norm's gradients, whole."""
        self.whole_gradients(out, "the head's and final norm's gradients (whole)", self.g.head_grad_params)

    def head_gradients_held(self, out: Sink, k: int) -> None:
        """During layer k's backward (stage 3): the head's and final norm's gradients, held whole in the root
        until its post-backward."""
        self.whole_gradients(out, "the head's and final norm's unsharded gradients (until the root's post-backward)",
                             self.g.head_grad_params)  # fmt: skip

    def root_in_backward(self, out: Sink) -> None:
        self.unsharded(out, "root unit unsharded (until its post-backward)", 1, self.u.root_unsharded)

    def root_prefetch(self, out: Sink, why: str = "", by: str = "the root's") -> None:
        """The root's pre-backward prefetch (stage 3 resharding after forward, D > 1): the all-gather output of
        the last max(1, P) layers (``by``: whose pre-backward it is)."""
        u, s = self.u, self.s
        if self.fsdp2 and s.reshard_after_forward and self.mesh > 1:
            ahead = min(max(1, s.prefetch), u.layers)
            what = "the last layer" if ahead == 1 else f"the last {ahead} layers"
            self.unsharded_layers(out, f"all-gather output of {what}, prefetched by {by} pre-backward{why}",
                                  u.layers - ahead, u.layers, "all_gather")  # fmt: skip

    def backward_at(self, k: int, moment: str, out: Sink) -> None:
        """Layer k's backward at ``moment`` (see :meth:`layer_moments`): the state, the gradients of the
        layers after it, what is unsharded and in flight, and its activations and temporaries."""
        last = self.u.layers - 1
        self.gradients_so_far(
            out,
            last - k,
            not self.fsdp2,
            f"gradients of the {last - k} layers after layer {k}" + ("" if self.fsdp2 else " and of the head"),
        )
        self._backward_unsharded(out, k, moment)
        if self.fsdp2:
            self.head_gradients_held(out, k)
        if k < last:
            self.reduce_scatter_input(
                out,
                f"reduce-scatter input of layer {k + 1} (in flight until the next post-backward)",
                self.g.params_of(k + 1),
                self.g.unsharded_of(k + 1),
            )
        early = moment == "early"
        params = 0 if moment == "unshard" else self.g.mlp_out_of(k) if early else self.g.params_of(k)
        whose = "its MLP output projection's" if early else "all of its parameters'"
        self.whole_gradients(out, f"layer {k}'s gradients so far (whole): {whose}", params)
        self._backward_activations(out, k, moment)

    def _backward_unsharded(self, out: Sink, k: int, moment: str) -> None:
        """The root and layer k (with ``reshard_after_forward = 0`` layers 0 … k) unsharded, and the
        all-gather outputs in flight around layer k's backward."""
        s = self.s
        rebuilt = k + 1 if self.fsdp2 and not s.reshard_after_forward else 1
        self.root_in_backward(out)
        self.unsharded_layers(
            out,
            f"layer {k} unsharded" if rebuilt == 1 else f"layers 0 … {k} unsharded (kept since forward)",
            k + 1 - rebuilt,
            k + 1,
        )
        self.kept_since_backward(out, k + 1)
        if not (self.fsdp2 and s.reshard_after_forward and self.mesh > 1):
            return
        self.backward_prefetched(out, k, moment)

    def backward_prefetched(self, out: Sink, k: int, moment: str) -> None:
        """The all-gather outputs around layer k's backward: at its copy-out its own and the rest of what the
        layer above prefetched; after its pre-backward the layers it prefetched below it."""
        s = self.s
        ahead = min(max(1, s.prefetch), k + 1 if moment == "unshard" else k)
        if moment == "unshard":
            why = f"layer {k}'s all-gather output (during its copy-out)"
            if ahead > 1:
                why += f" and {ahead - 1} more prefetched"
        else:
            why = (f"all-gather output of the {'layer' if ahead == 1 else f'{ahead} layers'} prefetched "
                   "for the backward ahead (the whole padded unit)")  # fmt: skip
        lo = k - ahead + 1 if moment == "unshard" else k - ahead  # its own and those below it, or those below only
        self.unsharded_layers(out, why, lo, lo + ahead, "all_gather")

    def _backward_activations(self, out: Sink, k: int, moment: str) -> None:
        """Layer k's saved activations and its backward's temporaries at ``moment``."""
        a, grad_in = self.a, self.activation_grad_formula
        if moment == "unshard":
            saved = a.saved_before(k + 1)
            self.activations(
                out, f"activations of layers 0 … {k}", saved, lambda: f"{a.saved_formula(k + 1)} = {n(saved)} B"
            )
            out.add("temporaries", f"the gradient entering layer {k}", a.activation_grad, grad_in)
        elif moment == "early":
            rebuilt = a.recomputed_at(k)
            saved = a.saved_before(k + 1) + rebuilt
            self.activations(
                out,
                f"activations of layers 0 … {k}" + (f" and layer {k}'s recomputed set" if rebuilt else ""),
                saved,
                lambda: a.saved_formula(k + 1) + (f" + {n(rebuilt)} B" if rebuilt else "") + f" = {n(saved)} B",
            )
            temps = a.activation_grad + a.op_pair
            out.add(
                "temporaries",
                f"layer {k}'s backward: the activation gradient and the widest pair of op gradients",
                temps,
                lambda: f"{grad_in()} + {a.op_pair_formula} = {n(temps)} B",
            )
            self.in_flight(out)
        else:
            saved = a.saved_before(k)
            self.activations(
                out,
                f"activations of layers 0 … {k - 1} (layer {k}'s freed)",
                saved,
                lambda: f"{a.saved_formula(k)} = {n(saved)} B",
            )
            out.add("temporaries", f"layer {k}'s input gradient", a.activation_grad, grad_in)

    # ------------------------------------------------------------------ after backward
    def root_gradients(self, out: Sink) -> None:
        """The embedding's backward done, the root's post-backward not yet run: the root still unsharded,
        its whole gradients computed, layer 0's reduce-scatter input still in flight."""
        u = self.u
        self.gradients_so_far(out, u.layers, False, "gradients of every layer")
        self.unsharded(out, "root unit unsharded (until its post-backward)", 1, u.root_unsharded)
        self.kept_since_backward(out, 0)
        self._root_unsharded_gradients(out)
        self.reduce_scatter_input(
            out, "reduce-scatter input of layer 0 (in flight until the root's post-backward)", self.g.params_of(0),
            self.g.unsharded_of(0),
        )  # fmt: skip
        if self.g.tied_params:
            self._tied_embedding_sum(out)

    def _tied_embedding_sum(self, out: Sink) -> None:
        """Tied embeddings: the embedding's backward makes a dense V × h gradient, and autograd's AccumulateGrad adds
        it to the head's gradient already on the shared weight out of place (torch 2.13: aten.add, traced), so
        both and their sum are held at once, in the gather width."""
        elements, g = self.g.tied_params, self.gather if self.fsdp2 else self.grads_width
        value = 2 * elements * g
        out.add("temporaries", "the tied embedding's gradient and its sum with the head's (added out of place)",
                value, lambda: f"2 × {n(elements)} elements × {g} B = {n(value)} B")  # fmt: skip

    def root_post_backward(self, out: Sink) -> None:
        u = self.g  # what trains of the root
        self.gradients_so_far(out, u.layers, False, "gradients of every layer")
        self.kept_since_backward(out, 0)
        self.unit_post_backward(out, u.root_params, self._root_unsharded_gradients)
        self.reduce_scatter_input(out, "reduce-scatter input of the root", u.root_params, u.root_unsharded)

    def _root_unsharded_gradients(self, out: Sink) -> None:
        # Waiting for the root's reduce-scatter at stages 2–3 (the only ones that walk these instants).
        u = self.g
        width = self.gather if self.fsdp2 else self.grads_width
        grads = u.root_params * width
        out.add(
            "unsharded_grads",
            "the root's unsharded gradients (embedding, final norm, head)",
            grads,
            lambda: f"{n(u.root_params)} elements × {width} B = {n(grads)} B",
        )

    def optimizer_step(self, out: Sink) -> None:
        """Every gradient, and AdamW's temporaries: for its largest tensor (for-loop: one tensor at a time), for
        every tensor at once (foreach), none (fused: one kernel, in place)."""
        s, u = self.s, self.g  # the largest tensor that trains
        total, formula = self.all_gradients()
        out.add("gradients", "every gradient", total, formula)
        opt = next(ln for ln in self.lines if ln.tensor_class == "optimizer_states")
        if s.opt_states < 2 or not opt.copies or s.optimizer_impl == "fused":  # offloaded: it steps on the host
            return
        if s.optimizer_impl == "foreach":
            # torch/optim/adam.py _multi_tensor_adam: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), then
            # divided and added to in place: one temporary of every second moment at once
            every = opt.bytes // opt.copies
            out.add("temporaries", "the optimizer's temporaries: the square root of every second moment at once "
                    "(foreach)", every, lambda: f"{n(opt.bytes)} B ÷ {opt.copies} states = {n(every)} B")  # fmt: skip
            return
        if opt.sharded:
            elements = u.largest_tensor_shard if self.fsdp2 else shard(u.largest_tensor, self.mesh)
        else:
            elements = u.largest_tensor
        value = 2 * elements * s.opt_bytes
        out.add(
            "temporaries",
            f"the optimizer's temporaries for its largest tensor ({u.largest_tensor_name}): "
            "sqrt of the second moment and the update's denominator",
            value,
            lambda: f"2 × {n(elements)} elements × {s.opt_bytes} B = {n(value)} B",
        )
