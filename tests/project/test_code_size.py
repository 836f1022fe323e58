"""Size limits: no package module over 400 lines (no exception: a module is cut by idea), no
protocol function over 80."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_samza_expand"
MAX_MODULE_LINES = 400
MAX_PROTOCOL_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_package_module_over_400_lines():
    too_long = {
        str(path.relative_to(PACKAGE)): lines
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}


def test_no_protocol_function_over_80_lines():
    too_long = []
    for path in sorted((PACKAGE / "_protocol").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > MAX_PROTOCOL_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines} lines)")
    assert too_long == []
