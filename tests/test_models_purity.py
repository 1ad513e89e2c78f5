"""``app/ledger/models`` is part of the pure core: the same rules as ``tests/test_purity.py``.

That test globs ``app/ledger/*.py`` only, so the subpackage is checked here with the same
detectors: standard library and ``app.ledger`` imports only, no web code, no float literals,
no true division, no ``float()`` / ``round()``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "app" / "ledger" / "models"
MODULES = sorted(PACKAGE.glob("*.py"))
FORBIDDEN = ("fastapi", "starlette", "jinja2", "uvicorn", "httpx", "app.web", "app.receipts", "app.cli")


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported(module: ast.Module) -> list[str]:
    names: list[str] = []
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports hide where a name comes from"
            assert node.module is not None
            names.append(node.module)
    return names


def test_the_package_has_its_modules() -> None:
    assert {p.name for p in MODULES} >= {
        "__init__.py",
        "architecture.py",
        "known.py",
        "inventory.py",
        "fsdp2.py",
        "activations.py",
    }


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_only_the_standard_library_and_the_core(path: Path) -> None:
    for name in imported(tree(path)):
        assert not any(name == f or name.startswith(f + ".") for f in FORBIDDEN), name
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or top == "__future__" or name.startswith("app.ledger"), name


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_float_literals_true_division_or_float_calls(path: Path) -> None:
    module = tree(path)
    floats = [
        n.lineno for n in ast.walk(module) if isinstance(n, ast.Constant) and isinstance(n.value, float | complex)
    ]
    divisions = [
        n.lineno for n in ast.walk(module) if isinstance(n, ast.BinOp | ast.AugAssign) and isinstance(n.op, ast.Div)
    ]
    calls = [
        n.lineno
        for n in ast.walk(module)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in {"float", "round"}
    ]
    assert (floats, divisions, calls) == ([], [], [])


def test_the_detectors_catch_what_they_claim() -> None:
    sample = ast.parse("import fastapi\nfrom .x import y\n")
    with pytest.raises(AssertionError, match="relative imports"):
        imported(sample)
    assert imported(ast.parse("import fastapi\nfrom app.web import z\n")) == ["fastapi", "app.web"]
