"""DeepSpeed: its ``ds_config.json`` read into a scenario and written back, and its own memory estimators.

- :mod:`~app.interop.deepspeed.keys`: the one key table, each key with DeepSpeed 0.19.8's default, the
  scenario fields it sets and its width rule; the reader and the writer both use it.
- :mod:`~app.interop.deepspeed.reader`: :func:`import_deepspeed`, which runs the section readers in the
  order their lines are shown, and reads the precision, the optimizer and the top-level keys itself.
- :mod:`~app.interop.deepspeed.zero`: zero_optimization's stage, offload and the keys not modelled.
- :mod:`~app.interop.deepspeed.resolve`: the sizes (buckets, prefetch, persistence), "auto" resolved.
- :mod:`~app.interop.deepspeed.partitions`: ZeRO++ hpZ and MiCS, stage 3's.
- :mod:`~app.interop.deepspeed.batch`: the batch sizes and activation checkpointing.
- :mod:`~app.interop.deepspeed.report`: one line per key, or a refusal naming one.
- :mod:`~app.interop.deepspeed.values`: one value read by its type and bounds.
- :mod:`~app.interop.deepspeed.writer`: the scenario as a ``ds_config.json``, with notes.
- :mod:`~app.interop.deepspeed.estimator`: DeepSpeed's ZeRO estimators, with every difference named.
"""
