"""Stage 3 with ``wrap = embed-tail``: the embedding and the tail (final norm + head) carved into units of
their own, the root owning no parameter (Accelerate 1.15.0's ``fsdp2_prepare_model``; untied models).

What changes against the root recipe (:class:`~app.ledger.peak.schedule.step.Step`), each read in traces of
transformers' Llama sharded by Accelerate's own code (``docs/fidelity.md``, "The stacks"):

- **forward**: the embedding is all-gathered first and resharded after its forward (its all-gather output
  held until layer 0's copy-out); nothing of the root stays unsharded through the layers; the tail is
  all-gathered after the last layer and kept (``reshard_after_forward=False``), its all-gather output held
  until the root's forward returns — through the loss, when the loss runs inside the model;
- **the tail's backward** runs the group's pre- and post-backward once per module: for the head (the tail
  already unsharded, nothing prefetched: the prefetch target is the tail itself), a reduce-scatter of the
  head's gradient, then for the final norm a second all-gather of the whole tail (beside the head's
  reduce-scatter input still in flight) which also prefetches the last layer;
- **layers**: no root unsharded and no head gradients held; the tail's gradients are sharded; layer 0's
  pre-backward prefetches the embedding;
- **the embedding's backward** (its copy-out, its gradients, its post-backward) ends the step's backward;
  the root has nothing to reduce.
"""

from __future__ import annotations

from app.ledger.arithmetic import n
from app.ledger.peak.schedule.sinks import Sink
from app.ledger.peak.schedule.step import Moment, Step


class CarvedStep(Step):
    def plan(self) -> list[Moment]:
        plan = [Moment("forward-embedding", "forward at the embedding", "forward", self.forward_embedding)]
        plan += [m for m in super().plan() if m.key.startswith("forward-layer-")]
        plan += [
            Moment("forward-tail", "forward at the tail (final norm and head)", "forward", self.forward_tail),
            Moment("end-of-forward", "end of forward", "forward", self.end_of_forward),
        ]
        if self.s.loss == "inside":
            plan.append(Moment("loss-forward", "loss forward, inside the root's forward", "loss", self.loss_forward))
        plan += [
            Moment("loss-backward", "loss backward", "loss", self.loss_backward),
            Moment("head-backward", "backward at the head", "backward", self.head_backward),
            Moment("tail-head-reduce", "the tail's post-backward for the head", "backward", self.tail_head_reduce),
            Moment("tail-regather", "the tail all-gathered again for the final norm", "backward", self.tail_regather),
        ]
        plan += [m for k in self.candidate_layers() for m in self.layer_moments(k)]
        plan += [
            Moment("embedding-unshard", "backward at the embedding: all-gather copy-out", "backward",
                   self.embedding_unshard),
            Moment("embedding-gradients", "backward at the embedding (its gradients computed)", "backward",
                   self.embedding_gradients),
            Moment("embedding-post-backward", "the embedding's post-backward", "backward",
                   self.embedding_post_backward),
            Moment("optimizer-step", "optimizer step", "optimizer", self.optimizer_step),
        ]  # fmt: skip
        return plan

    # ------------------------------------------------------------------ what the carved units hold
    def _gathered(self) -> bool:
        return self.mesh > 1

    def tail(self, out: Sink, gathering: bool = False) -> None:
        """The tail unit unsharded (final norm and head), and its all-gather output while ``gathering``."""
        u = self.u
        self.unsharded(out, "tail unit unsharded (final norm, head: not resharded after forward)", 1, u.tail_unsharded)
        if gathering and self._gathered() and not self.keeps_forward:
            self.unsharded(out, "the tail's all-gather output", 1, u.tail_unsharded, "all_gather")

    def tail_gradients(self, out: Sink, head_only: bool) -> None:
        """The tail's gradient shards after its post-backward(s): the head's, then the final norm's too. Not when
        every shard is counted already (synced in an earlier micro batch), nor without sync (its gradient is then
        among the unsharded ones, the instant having set :attr:`tail_done`)."""
        if self.shards_all or not self.reducing:
            return
        u, w = self.g, self.grads_width * self.grad_line.copies
        elements = u.head_unsharded // self.mesh if head_only else u.tail_shard
        what = "the head's gradient shard" if head_only else "the tail's gradient shard (head and final norm)"
        out.add("gradients", what, elements * w, lambda: f"{n(elements)} elements × {w} B = {n(elements * w)} B")

    # ------------------------------------------------------------------ forward
    def forward_embedding(self, out: Sink) -> None:
        u = self.u
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self.unsharded(out, "embedding unit unsharded", 1, u.embed_unsharded)
        self.kept_since_backward(out, 0, forward=True)
        if self._gathered() and not self.keeps_forward:
            self.unsharded(out, "the embedding's all-gather output (during its copy-out)", 1, u.embed_unsharded,
                           "all_gather")  # fmt: skip

    def kept_since_backward(self, out: Sink, lo: int, forward: bool = False) -> None:
        """The layers', and the tail unit's (which is not resharded after forward either)."""
        super().kept_since_backward(out, lo, forward)
        if self.keeps_forward if forward else self.keeps_backward:
            self.unsharded(out, "tail unit kept unsharded since its backward (reshard_after_backward 0)", 1,
                           self.u.tail_unsharded)  # fmt: skip

    def first_unit(self) -> tuple[str, int]:
        return "the embedding's", self.u.embed_unsharded

    def root_and_kept_layers(self, out: Sink, kept_layers: int) -> None:
        """No root unit: it owns no parameter. With reshard_after_forward = 0 (Accelerate passes it to every
        unit it carves) the embedding stays unsharded after its forward, and the layers after theirs."""
        if not self.s.reshard_after_forward:
            self.unsharded(out, "embedding unit kept unsharded after forward (reshard_after_forward = 0)", 1,
                           self.u.embed_unsharded)  # fmt: skip
        if kept_layers:
            self.unsharded_layers(out, "layers kept unsharded after forward (reshard_after_forward = 0)", 0,
                                  kept_layers)  # fmt: skip

    def forward_tail(self, out: Sink) -> None:
        u, a = self.u, self.a
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self.root_and_kept_layers(out, self.kept_after_forward())
        self.tail(out, gathering=True)
        if self._gathered() and not self.keeps_forward:
            self.unsharded(out, f"layer {u.layers - 1}'s all-gather output, held until this copy-out", 1,
                           u.unsharded_of(u.layers - 1), "all_gather")  # fmt: skip
        saved = a.saved_before(u.layers)
        self.activations(out, "activations of every layer", saved,
                         lambda: f"{a.saved_formula(u.layers)} = {n(saved)} B")  # fmt: skip
        self.activations(out, "the hidden state entering the final norm", a.activation_grad,
                         self.activation_grad_formula)  # fmt: skip

    def forward_done(self, out: Sink) -> None:
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self.root_and_kept_layers(out, self.kept_after_forward())
        value, formula = self.saved_through_forward()
        self.activations(out, "activations saved by every layer, the final norm and the residual stream", value,
                         formula)  # fmt: skip

    def end_of_forward(self, out: Sink) -> None:
        self.tail(out, gathering=True)  # its all-gather output is freed when the root's forward returns
        super().end_of_forward(out)

    def loss_forward(self, out: Sink) -> None:
        """The loss inside the model: the logits, their copy in the loss width and its log-probabilities, with
        the tail's all-gather output still held (the root's forward has not returned)."""
        a, s = self.a, self.s
        self.tail(out, gathering=True)
        self.forward_done(out)
        self.activations(out, "logits (the head's output, in the activation width)", a.logits_out,
                         lambda: f"s·b·V × {s.act_bytes} B = {n(a.logits_out)} B")  # fmt: skip
        both = 2 * a.logits_saved
        out.add("temporaries", "the logits in the loss width and their log-probabilities", both,
                lambda: f"2 × s·b·V × {s.logits_bytes} B = {n(both)} B")  # fmt: skip

    def loss_backward(self, out: Sink) -> None:
        self.tail(out)
        super().loss_backward(out)

    # ------------------------------------------------------------------ the tail's backward
    def root_prefetch(self, out: Sink, why: str = "", by: str = "the root's") -> None:
        """Nothing at the head: the tail's first pre-backward prefetches the tail itself, already unsharded."""

    def head_backward(self, out: Sink) -> None:
        self.tail(out)
        super().head_backward(out)

    def head_gradients(self, out: Sink) -> None:
        """The tail's first backward (the head's) gives only the head a gradient."""
        self.whole_gradients(out, "the head's gradient (whole)", self.g.head_unsharded)

    def _after_head(self, out: Sink, reducing_now: bool = False) -> None:
        """What the tail's backward holds after the head's: the head's gradient shard and its reduce-scatter
        input (in flight until the next), the activations but the head input, the head input's gradient."""
        u, a = self.g, self.a  # what trains (its layers are the model's)
        # the tail's first post-backward, the head's: its accumulated gradient is freed once reduce-scattered
        self.tail_done = 0 if reducing_now and self.sync_last and self.is_last else u.head_params
        self.gradients_so_far(out, 0, False, "gradients (none reduced yet)")
        self.root_and_kept_layers(out, self.kept_after_forward())
        self.tail_gradients(out, head_only=True)
        self.reduce_scatter_input(out, "the head's reduce-scatter input (in flight until the next)", u.head_params,
                                  u.head_unsharded)  # fmt: skip
        value = a.saved_before(u.layers) + a.extra_residual
        self.activations(
            out,
            "activations saved by every layer, the final norm and the residual stream",
            value,
            lambda: f"{a.saved_formula(u.layers)} + residual {n(a.extra_residual)} B = {n(value)} B",
        )
        out.add("temporaries", "the head input's gradient", a.activation_grad, self.activation_grad_formula)

    def tail_head_reduce(self, out: Sink) -> None:
        """The head's post-backward. Without sync the tail is resharded by then and the head's fresh gradient still
        held beside the accumulated one, which the last micro batch's reduce-scatter reads (traced, torch 2.13)."""
        self._after_head(out, reducing_now=True)
        if self.sync_last:
            self.whole_gradients(out, "the head's fresh gradient (whole), beside the accumulated one",
                                 self.g.head_unsharded)  # fmt: skip
        else:
            self.tail(out)

    def tail_regather(self, out: Sink) -> None:
        self._after_head(out)
        self.tail(out, gathering=True)

    # ------------------------------------------------------------------ layers
    def backward_at(self, k: int, moment: str, out: Sink) -> None:
        self.tail_done = self.g.head_params + self.g.norm_params  # the tail's post-backwards have run
        super().backward_at(k, moment, out)

    def root_in_backward(self, out: Sink) -> None:
        """No root unit to hold (it owns no parameter); the embedding when kept since forward."""
        self.root_and_kept_layers(out, 0)

    def head_gradients_held(self, out: Sink, k: int) -> None:
        """The tail's gradients are sharded by now; after the last layer's backward the final norm's
        reduce-scatter input is the one in flight."""
        self.tail_gradients(out, head_only=False)
        if k == self.u.layers - 1:
            self.reduce_scatter_input(out, "the final norm's reduce-scatter input (in flight until the next)",
                                      self.g.norm_params, self.g.norm_params)  # fmt: skip

    def backward_prefetched(self, out: Sink, k: int, moment: str) -> None:
        """The root recipe's, and the embedding when the prefetch reaches below layer 0."""
        super().backward_prefetched(out, k, moment)
        reach = max(1, self.s.prefetch)
        if reach > (k + 1 if moment == "unshard" else k):
            self.unsharded(out, "the embedding's all-gather output, prefetched", 1, self.u.embed_unsharded,
                           "all_gather")  # fmt: skip

    # ------------------------------------------------------------------ the embedding's backward
    def _embedding_backward(self, out: Sink) -> None:
        u = self.u
        self.tail_done = self.g.head_params + self.g.norm_params
        self.gradients_so_far(out, u.layers, False, "gradients of every layer")
        self.kept_since_backward(out, 0)
        self.tail_gradients(out, head_only=False)

    def embedding_unshard(self, out: Sink) -> None:
        u = self.u
        self._embedding_backward(out)
        self.unsharded(out, "embedding unit unsharded", 1, u.embed_unsharded)
        if self._gathered() and self.s.reshard_after_forward:  # else kept unsharded since forward: no gather
            self.unsharded(out, "the embedding's all-gather output (during its copy-out)", 1, u.embed_unsharded,
                           "all_gather")  # fmt: skip
        self.reduce_scatter_input(out, "reduce-scatter input of layer 0 (in flight until the next)",
                                  self.g.params_of(0), self.g.unsharded_of(0))  # fmt: skip
        out.add("temporaries", "the gradient entering the embedding", self.a.activation_grad,
                self.activation_grad_formula)  # fmt: skip

    def embedding_gradients(self, out: Sink) -> None:
        u = self.u
        self._embedding_backward(out)
        self.unsharded(out, "embedding unit unsharded", 1, u.embed_unsharded)
        self.whole_gradients(out, "the embedding's gradient (whole)", self.g.embed_unsharded)
        self.reduce_scatter_input(out, "reduce-scatter input of layer 0 (in flight until the next)",
                                  self.g.params_of(0), self.g.unsharded_of(0))  # fmt: skip

    def embedding_post_backward(self, out: Sink) -> None:
        """The embedding's reduce-scatter: its whole gradient, the input in the reduce width and the output,
        its gradient shard, all at once."""
        u = self.g
        self._embedding_backward(out)
        self.unit_reduce_scatter(out, "the embedding's", u.embed_params, u.embed_unsharded, u.embed_shard)

    def unit_reduce_scatter(self, out: Sink, whose: str, params: int, unsharded: int, shard: int) -> None:
        """A carved unit's post-backward: its whole gradient, the reduce-scatter's input in the reduce width and its
        output, the unit's gradient shard, all at once."""
        w = self.grads_width * self.grad_line.copies
        self.unit_post_backward(out, params, lambda o: self.whole_gradients(o, f"{whose} gradient (whole)",
                                                                            unsharded))  # fmt: skip
        self.reduce_scatter_input(out, f"{whose} reduce-scatter input", params, unsharded)
        if not self.reducing:  # a micro batch before the last, without sync: no reduce-scatter output
            return
        shard_bytes = shard * w
        out.add("gradients", f"{whose} gradient shard (the reduce-scatter's output)", shard_bytes,
                lambda: f"{n(shard)} elements × {w} B = {n(shard_bytes)} B")  # fmt: skip
        r = self.reduce
        if r != self.grads_width:  # the output lands in the reduce width first, then is cast into the shard
            cast = shard * r
            out.add("reduce_scatter", "the reduce-scatter's output in the reduce width, before its cast", cast,
                    lambda: f"{n(shard)} elements × {r} B = {n(cast)} B")  # fmt: skip
