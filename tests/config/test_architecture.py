"""The tree keeps its shape: the import-linter contracts in pyproject.toml hold, and no
module imports itself back through others (lazy imports inside functions included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("approvals", "workflows", "config")


def import_circles() -> list[list[str]]:
    """Return each set of modules that import one another in a circle (Tarjan's algorithm)."""
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowest[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in on_stack:
                lowest[module] = min(lowest[module], index[imported])
        if lowest[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return circles


class TestLayers:
    def test_every_import_linter_contract_is_kept(self):
        lint = Path(sys.executable).parent / "lint-imports"

        result = subprocess.run(
            [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
        )

        assert result.returncode == 0, result.stdout + result.stderr
        assert "0 broken" in result.stdout


class TestImportCircles:
    def test_no_module_imports_itself_back_through_others(self):
        assert import_circles() == []
