"""What the writers give: text to copy and what it could not say (shared by the DeepSpeed and FSDP2 writers)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Snippet"]


@dataclass(frozen=True, slots=True)
class Snippet:
    """Text to copy (JSON or Python) and what it could not say."""

    text: str
    notes: tuple[str, ...]
