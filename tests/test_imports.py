"""The import contract: every module of ``app/`` imports only its own layer and the layers below, and no
two modules import each other, directly or around a circle (imports inside functions count too).

The layers, bottom up::

    app.ledger   (bounds, arithmetic, formula ← models ← scenario ← state ← peak ← ledger, pipeline ← verify ← estimate
                 ← layouts)
    app.interop  framework formats in and out
    app.receipts renderings of an estimate
    app.trace, app.observed   use the ledger and the receipts only
    app.web, app.cli          the two faces (the CLI's ``serve`` starts the web server)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.support import paths

# package → the packages its modules may import (besides their own)
ALLOWED: dict[str, frozenset[str]] = {
    "app.ledger": frozenset(),
    "app.interop": frozenset({"app.ledger"}),
    "app.receipts": frozenset({"app.ledger", "app.interop"}),
    "app.trace": frozenset({"app.ledger", "app.receipts", "app"}),
    "app.observed": frozenset({"app.ledger", "app.receipts"}),
    "app.web": frozenset({"app.ledger", "app.interop", "app.receipts", "app.trace", "app.observed", "app"}),
    "app.cli": frozenset(
        {"app.ledger", "app.interop", "app.receipts", "app.trace", "app.observed", "app.web.http.server"}
    ),
}
# Inside the core: a room may import rooms of its own rank or below.
LEDGER_RANKS: dict[str, int] = {
    "app.ledger.bounds": 0,
    "app.ledger.arithmetic": 0,
    "app.ledger.formula": 0,
    "app.ledger.json_text": 0,
    "app.ledger.models": 1,
    "app.ledger.scenario": 2,
    "app.ledger.state": 3,
    "app.ledger.peak": 4,
    "app.ledger.ledger": 5,
    "app.ledger.pipeline": 5,
    "app.ledger.verify": 6,
    "app.ledger.estimate": 7,
    "app.ledger.layouts": 8,  # the layout search: estimates many scenarios
}


def module_name(path: Path) -> str:
    parts = path.relative_to(paths.ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(paths.APP.rglob("*.py"))}


def imports_of(path: Path) -> Iterator[str]:
    """The ``app`` modules a file imports, anywhere in it (a name imported from a package counts as the
    package, or as its submodule where one exists)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "app")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "app":
            assert node.level == 0, "relative imports hide where a name comes from"
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield sub if sub in MODULES else node.module


def package_of(module: str, packages: Mapping[str, object]) -> str | None:
    """The longest key of ``packages`` that ``module`` is or lies under."""
    found = [p for p in packages if module == p or module.startswith(p + ".")]
    return max(found, key=len) if found else None


def up_the_layers(importer: str, imported: str) -> bool:
    own = package_of(importer, ALLOWED)
    if own is None or package_of(imported, ALLOWED) == own:
        return False
    # "app" itself (its __version__) is allowed alone, not everything under it
    return not any(imported == a or (a != "app" and imported.startswith(a + ".")) for a in ALLOWED[own])


def up_the_core(importer: str, imported: str) -> bool:
    mine, theirs = package_of(importer, LEDGER_RANKS), package_of(imported, LEDGER_RANKS)
    if mine is None or theirs is None:
        return False
    return LEDGER_RANKS[theirs] > LEDGER_RANKS[mine]


EDGES: dict[str, set[str]] = {m: set(imports_of(p)) - {m} for m, p in MODULES.items()}


def test_every_package_has_a_layer() -> None:
    assert [m for m in MODULES if m != "app" and package_of(m, ALLOWED) is None] == []
    core = [m for m in MODULES if m.startswith("app.ledger.")]
    assert [m for m in core if package_of(m, LEDGER_RANKS) is None] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_layer(module: str) -> None:
    assert sorted(i for i in EDGES[module] if up_the_layers(module, i) or up_the_core(module, i)) == []


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_circles() -> None:
    # A face (__init__) that hands on its submodules' names imports them; the submodules importing each
    # other through it is no circle of ideas, so faces are left out of the graph.
    faces = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    edges = {m: {i for i in e if i not in faces} for m, e in EDGES.items() if m not in faces}
    assert circles(edges) == []


def test_the_checks_catch_what_they_claim() -> None:
    """A circle, an upward import across packages and one inside the core are each found."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert up_the_layers("app.ledger.state.host", "app.receipts.receipt")
    assert up_the_layers("app.trace.jobs", "app.web.http.settings")
    assert not up_the_layers("app.web.routes.api", "app.ledger.estimate")
    assert up_the_core("app.ledger.models.activations", "app.ledger.scenario.fields")
    assert not up_the_core("app.ledger.peak.schedule", "app.ledger.models.defaults")
