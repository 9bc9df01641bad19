"""Dependencies flow one way: curator -> conversations -> memory -> webhooks -> accounts (DESIGN.md).

An app imports only the apps below it, at module level or inside a function alike; what an app
needs from one above it comes through a registry the upper app fills (memory.indexing,
memory.tools).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.fixtures import ROOT

LAYERS = ["accounts", "webhooks", "memory", "conversations", "curator"]  # each may import those before it


def imported_apps(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(LAYERS)


def upward_imports(app_dir: Path, app: str) -> list[str]:
    above = set(LAYERS[LAYERS.index(app) + 1 :])
    return [
        f"{path.relative_to(app_dir.parent)} imports {', '.join(sorted(imported_apps(path) & above))}"
        for path in sorted(app_dir.rglob("*.py"))
        if "migrations" not in path.parts and imported_apps(path) & above
    ]


def test_no_app_imports_an_app_above_it():
    assert [problem for app in LAYERS for problem in upward_imports(ROOT / app, app)] == []


def test_the_check_finds_an_upward_import(tmp_path):
    rogue = tmp_path / "memory"
    rogue.mkdir()
    (rogue / "commands.py").write_text("def reindex():\n    from conversations.indexing import MESSAGES\n")
    assert upward_imports(rogue, "memory") == ["memory/commands.py imports conversations"]
