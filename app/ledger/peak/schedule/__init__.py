"""The schedule-aware peak: what one rank holds at each named instant of a training step, and the worst.

The seed's declared peak adds maxima that are never alive together (every gradient *and* every
activation *and* the largest gather). A real step holds different things at different instants,
and its peak is one instant. With a model the lab knows the layer structure, so it can walk the
step the way PyTorch's FSDP2 schedules memory (``torch/distributed/fsdp/_fully_shard``: the
parameter group's ``unshard`` / ``wait_for_unshard`` / ``reshard``, ``pre_backward`` with
``_backward_prefetch``, ``post_backward`` with ``foreach_reduce`` and its
``reduce_scatter_states``; checked against ``FSDPMemTracker`` traces in ``docs/fidelity.md``).

The instants (each a list of :class:`Entry` lines, bytes with their formula):

- **forward at layer k** (stage 3; k = 0, 1 and L − 1: the total is linear in k in between): the
  layer's all-gather copy-out, its output beside its unsharded parameters, with the previous unit's
  all-gather output still held (``wait_for_unshard`` frees it after the next copy-out; for layer 0
  the root's), the activations of the layers before it and the hidden state entering it;
- **end of forward**: the model state (no gradients: ``zero_grad(set_to_none=True)``), the root
  unit (embedding, final norm, head) still unsharded — FSDP2 does not reshard the root after
  forward, backward needs the head first —, with ``reshard_after_forward = 0`` every layer
  unsharded too, every saved activation, and the logits in the activation width;
- **loss backward** (``_log_softmax_backward_data``): the same state, the saved activations with the
  loss's saved log-probabilities (s·b·V in the loss width) instead of the logits, and two more
  logits-sized tensors of the loss width (the gradient of the log-probabilities and of the logits);
  with the loss inside the model (``loss = inside``: transformers' ``ForCausalLM`` given ``labels=``)
  the loss is part of the root module's forward, so the root's pre-backward runs before the loss's
  backward and the last layer's all-gather output (P of them) is already resident here;
- **backward at the head**: the root's pre-backward has prefetched the last layer; the logits' gradient
  in the activation width, the head's and final norm's gradients, every saved activation;
- **backward at layer k** (the worst k; between k = max(1, P) and L − 2 the total is linear in k, so
  the candidates are the ends and the first P + 1 layers), three moments of it: the all-gather
  copy-out of its pre-backward (``…-unshard``: its own all-gather output beside its unsharded
  parameters, nothing computed yet), early (below) and done (``…-done``: its activations freed, all its
  weight gradients computed). Early: the sharded gradients of the layers
  after k (they appear layer by layer), the root and layer k unsharded (with
  ``reshard_after_forward = 0`` layers 0 … k), the all-gather output of the layer prefetched for
  the next step of backward (FSDP2's implicit backward prefetch of one unit, or P), the
  reduce-scatter input of layer k + 1 (a whole padded layer in the reduce width: FSDP2 keeps one
  in flight until the next post-backward), the head's and final norm's unsharded gradients (held
  until the root's post-backward, at the very end), the activations of layers 0 … k (under full
  recomputation: their checkpointed inputs and layer k's recomputed set), and the temporaries of
  the layer's backward: its first weight gradient (the MLP's output projection), the activation
  gradient flowing in (s·b·h) and the widest pair of op gradients (2·s·b·i for the MLP, 2·a·s²·b for
  materialised attention scores);
- **backward at the embedding** (stages 2–3): every layer's gradients, the root still unsharded with
  its whole gradients, layer 0's reduce-scatter input still in flight;
- **root post-backward**: all layers' sharded gradients, the root's unsharded gradients and its
  reduce-scatter input (the layer's and the root's unsharded parameters are freed by then);
- **optimizer step**: the model state with every gradient, and the step's temporaries (AdamW one
  tensor at a time: two temporaries of the largest tensor's shard, ``sqrt`` and the denominator).

Stage 3 is FSDP2's schedule as written. Stages 0–2 reuse the instants where they hold (whole
parameters, so nothing is gathered; gradients fill during backward; ZeRO-2 reduce-scatters each
layer as it finishes) and say where they are an approximation (:data:`NOTES`).

The saved activations are the lab's activation ledger with the scenario's ``norms`` (:mod:`.terms`).
Every byte count is an exact integer. The declared inputs stay what they are: buckets and
overhead are resident at every instant, the contingency is on top of the worst instant. A typed
(measured) activation figure scales every instant's saved activations by measured ÷ modelled.

The rooms: :mod:`.instants` (what an answer is: Entry, Instant, Schedule, the categories and parts),
:mod:`.layout` (when a scenario has a schedule, and the model's units at D), :mod:`.terms` (the
activation terms), :mod:`.pieces` and :mod:`.step` (the walk: the pieces the instants share, then each
instant once), :mod:`.sinks` (the sum-only and the entry-keeping collector it feeds) and :mod:`.walk`
(running it: :func:`schedule`, cached, and :func:`saved_activations`; the fit finder's :func:`totals`).
"""

from app.ledger.peak.schedule.instants import CATEGORIES, NOTES, PARTS, Entry, Instant, Schedule
from app.ledger.peak.schedule.layout import Layout, layout, not_schedulable
from app.ledger.peak.schedule.terms import ActivationTerms, activation_terms
from app.ledger.peak.schedule.walk import saved_activations, schedule, totals

__all__ = [
    "CATEGORIES",
    "NOTES",
    "PARTS",
    "ActivationTerms",
    "Entry",
    "Instant",
    "Layout",
    "Schedule",
    "activation_terms",
    "layout",
    "not_schedulable",
    "saved_activations",
    "schedule",
    "totals",
]
