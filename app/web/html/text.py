"""Escaping for the HTML builders."""

from __future__ import annotations

from html import escape


def esc(text: str) -> str:
    """``text`` safe inside an element or a double- or single-quoted attribute."""
    return escape(text, quote=True)
