"""The training peak: the seed's declared sum of maxima, the schedule-aware walk, and the fit finder.

- :mod:`app.ledger.peak.declared`: the declared peak (persistent + gather + buckets + activations +
  overhead, with the contingency on top) and its parts.
- :mod:`app.ledger.peak.schedule`: the named instants of one FSDP2 step, each a list of what is resident.
- :mod:`app.ledger.peak.fit`: the smallest changes that make a run fit.
"""
