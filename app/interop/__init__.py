"""Framework formats in and out: what the lab reads from DeepSpeed and writes for DeepSpeed and FSDP2.

Sits above the core (``app.ledger``) and below the receipts: it turns other tools' configs into a
:class:`~app.ledger.scenario.Scenario` and a scenario back into their configs and snippets.
"""
