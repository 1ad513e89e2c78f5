"""What every receipt says the lab does not claim: in the JSON, the table, the page. A module of its own so that
the table and the page can say it without importing the JSON receipt's models."""

from __future__ import annotations

DISCLAIMER = (
    "Exact persistent state, the seed's declared peak and, with a model, a schedule-aware peak checked "
    "against PyTorch's own accounting (FSDPMemTracker). The lab does not predict allocator fragmentation, "
    "kernel workspaces, throughput, or whether a particular framework version fits."
)
