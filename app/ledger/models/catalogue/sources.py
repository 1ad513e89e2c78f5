"""What a catalogue entry is, and how its source is cited."""

from __future__ import annotations

# (title, source, config.json facts): the facts read exactly like the published config.json.
Entry = tuple[str, str, dict[str, object]]


def hf(repo: str, paper: str = "") -> str:
    """The Hugging Face Hub config.json of ``repo``, then the paper or report that introduced the model (``paper``
    starts with "; ")."""
    return f"https://huggingface.co/{repo}/blob/main/config.json{paper}"
