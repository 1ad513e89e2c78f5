"""DeepSpeed: its ``ds_config.json`` read into a scenario, and DeepSpeed's own memory estimators beside the lab's.

- :mod:`app.interop.deepspeed.reader`: the config's keys read, resolved (``"auto"``) or refused by name.
- :mod:`app.interop.deepspeed.estimator`: DeepSpeed's ZeRO estimators, with every difference named.
"""
