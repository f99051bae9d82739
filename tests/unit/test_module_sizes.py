"""The house rule CONTRIBUTING.md states: every module of the core, the services and the client
within 450 lines and every function within 60, so that a module stays readable whole and a
function fits on a screen. Migrations are history (each a frozen script) and are left out, as
are the tests."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ("shared/memora", "services", "clients/python/memora_client")
LEFT_OUT = ("shared/memora/db/migrations/",)
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60


def _modules() -> Iterator[Path]:
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if not relative.startswith(LEFT_OUT):
                yield path


def test_every_module_fits_its_line_budget() -> None:
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_every_function_fits_its_line_budget() -> None:
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}"] = lines
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("tree", TREES)
def test_the_trees_checked_exist(tree: str) -> None:
    assert any((ROOT / tree).rglob("*.py"))
