"""JSON text read strictly: every key of an object once, every string writable as UTF-8.

Python's ``json`` keeps the last of a repeated key and accepts ``\\ud800``-style escapes of lone UTF-16 surrogates,
which no UTF-8 answer, page or file can hold: an answer that echoed one failed while it was written. Every JSON the
lab reads from a person (a request body, a pasted or named config.json, a DeepSpeed config, an observed run) goes
through :func:`loads_strict`, whose :class:`JSONTextError` names where the problem is.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["JSONTextError", "loads_strict", "writable"]


class JSONTextError(ValueError):
    """A key given twice in one object, or a lone surrogate; ``path``: the keys (and list indices) down to it."""

    def __init__(self, kind: str, message: str, path: tuple[str, ...]) -> None:
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path


def writable(text: str) -> str:
    """``text`` as it can be written back: a lone surrogate as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_text(text: str, path: tuple[str, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = writable(path[-1]) if path else writable(text)
        message = f"{where}: holds a lone UTF-16 surrogate ({writable(text[exc.start : exc.end])}), which is not text"
        raise JSONTextError("lone_surrogate", message, tuple(writable(p) for p in path) or (writable(text),)) from None


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: an object's keys, each once and each text."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        _check_text(key, ())
        if key in out:
            raise JSONTextError("duplicate_key", f"{key}: given more than once in one JSON object", (key,))
        out[key] = value
    return out


def _check_values(value: Any, path: tuple[str, ...]) -> None:
    """Every string value under ``value`` is text (the keys were checked as they were read)."""
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_values(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_values(item, (*path, str(index)))


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` with every key once and every string text; :class:`JSONTextError` if not (text that is not
    JSON at all raises ``json.JSONDecodeError`` as ``json.loads`` does). A duplicate key nested deeper is named by
    itself: the hook sees one object at a time."""
    value = json.loads(text, object_pairs_hook=_pairs)
    _check_values(value, ())
    return value
