"""zero3-lab: budget every byte of a ZeRO-3 / FSDP training run."""

__version__ = "0.1.0"
