"""The receipt is JSON-ready data: dicts with text keys, lists or tuples (both JSON arrays), text,
integers, booleans and None. ``as_json_data`` spells it as ``json.loads`` would read it back."""

from __future__ import annotations

from collections.abc import Iterator


def as_json_data(value: object) -> object:
    """``value`` with every tuple as a list; an AssertionError names anything JSON cannot hold."""
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value), f"a key that is not text in {list(value)!r}"
        return {k: as_json_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json_data(v) for v in value]
    assert value is None or isinstance(value, str | int), f"{type(value).__name__} is not JSON data: {value!r}"
    return value


def walk(value: object) -> Iterator[object]:
    """Every scalar inside nested dicts, lists and tuples (dict keys included)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from walk(v)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from walk(item)
    else:
        yield value
