"""Framework formats in and out: what the lab reads from DeepSpeed and writes for DeepSpeed and FSDP2.

Sits above the core (``app.ledger``) and below the receipts: it turns other tools' configs into a
:class:`~app.ledger.scenario.Scenario` and a scenario back into their configs and snippets.

- :mod:`app.interop.deepspeed`: ``ds_config.json`` in and out, and DeepSpeed's own estimators.
- :mod:`app.interop.fsdp2`: the scenario as an FSDP2 snippet (``fully_shard`` on its mesh).
- :mod:`app.interop.snippet`: what a writer gives, text to copy and what it could not say.
"""
