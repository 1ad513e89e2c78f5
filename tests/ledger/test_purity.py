"""The pure core stays pure: parse every module of ``app/ledger`` and look for what must not be there."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support import paths

LEDGER = paths.APP / "ledger"
MODULES = sorted(LEDGER.rglob("*.py"))
FORBIDDEN = ("fastapi", "starlette", "jinja2", "uvicorn", "httpx", "app.web", "app.receipts", "app.cli")
# Validation is not web: the core may read its inputs through pydantic (issue 12, item 2).
VALIDATION = frozenset({"pydantic", "pydantic_core"})


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(module: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports hide where a name comes from"
            assert node.module is not None
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def is_forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_the_core_has_modules() -> None:
    assert {p.name for p in MODULES} >= {"oracle.py", "ledger.py", "declared.py", "persistent.py", "scenario.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_web_stack_or_outer_layer_imports(path: Path) -> None:
    bad = [name for name in imported_modules(tree(path)) if is_forbidden(name)]
    assert bad == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_only_the_standard_library_and_the_core(path: Path) -> None:
    for name in imported_modules(tree(path)):
        top = name.split(".")[0]
        assert (
            top in sys.stdlib_module_names or top in VALIDATION or top == "__future__" or name.startswith("app.ledger")
        ), name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_float_literals(path: Path) -> None:
    floats = [
        (node.lineno, node.value)
        for node in ast.walk(tree(path))
        if isinstance(node, ast.Constant) and isinstance(node.value, float | complex)
    ]
    assert floats == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_true_division(path: Path) -> None:
    divisions = [
        node.lineno
        for node in ast.walk(tree(path))
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Div)
    ]
    assert divisions == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_float_conversion(path: Path) -> None:
    """``float(...)`` and ``math`` functions that return floats have no place in byte arithmetic."""
    calls = [
        node.lineno
        for node in ast.walk(tree(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"float", "round"}
    ]
    assert calls == []


def test_oracle_imports_nothing_from_app() -> None:
    names = imported_modules(tree(LEDGER / "verify" / "oracle.py"))
    assert [n for n in names if n == "app" or n.startswith("app.")] == []


def test_naive_test_model_shares_nothing_with_app() -> None:
    names = imported_modules(tree(paths.ROOT / "tests" / "support" / "naive_peak.py"))
    assert [n for n in names if n == "app" or n.startswith("app.")] == []


def test_the_detector_catches_what_it_claims() -> None:
    """The checks above would fail on an offending module (so an empty result means something)."""
    sample = ast.parse("import fastapi\nfrom app.receipts import csv_rows\nx = 1.5\ny = 3 / 2\ny /= 2\n")
    assert [n for n in imported_modules(sample) if is_forbidden(n)] == [
        "fastapi",
        "app.receipts",
        "app.receipts.csv_rows",
    ]
    assert any(isinstance(n, ast.Constant) and isinstance(n.value, float) for n in ast.walk(sample))
    ops = [n for n in ast.walk(sample) if isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.Div)]
    assert len(ops) == 2
