"""The zero3-lab test suite (a package so tests can share the naive oracle in ``naive_peak.py``)."""
