"""The edges stay thin (issue 28): API routes, MCP tools and CLI commands parse their input,
call one use case and map its result, so none of their functions is long; the use cases
live in `memora.usecases`, where the tests of the behaviour are."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 40
EDGES = [
    *sorted((ROOT / "services/api/routes").glob("*.py")),
    ROOT / "services/api/mcp/tools.py",
    *sorted(p for p in (ROOT / "services/cli").rglob("*.py") if p.name != "stack.py"),
]


def _functions(path: Path) -> list[tuple[str, int]]:
    """Every function of the module with its length in lines, decorators included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            assert node.end_lineno is not None
            found.append((node.name, node.end_lineno - first + 1))
    return found


@pytest.mark.parametrize("path", EDGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_edge_function_is_longer_than_forty_lines(path: Path) -> None:
    long = {name: n for name, n in _functions(path) if n > MAX_LINES}
    assert not long, f"{path.relative_to(ROOT)}: {long} (move the logic into a use case)"


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "long.py"
    module.write_text("def f() -> None:\n" + "    x = 1\n" * MAX_LINES)
    assert _functions(module) == [("f", MAX_LINES + 1)]
