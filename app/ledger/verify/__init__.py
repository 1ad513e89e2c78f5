"""Proof that the accounting is right: an independent oracle, the checks, and the mutants they kill.

- :mod:`app.ledger.verify.oracle`: a naive second stage table that imports nothing of the project.
- :mod:`app.ledger.verify.results`: what a check answers, and which checks exist.
- :mod:`app.ledger.verify.frozen`: the hand-computed references of checks 5 and 8.
- :mod:`app.ledger.verify.checks`: the checks a scenario's ledger must pass against the oracle.
- :mod:`app.ledger.verify.mutants`: deliberately wrong rules, and which check kills each.
"""
