"""Reading the project's own source in tests that hold code to a rule (who writes which model)."""

from __future__ import annotations

import ast


def call_chain(node: ast.AST) -> list[str]:
    """The names along a call chain, outermost first: Note.objects.filter(...).update -> [update, filter, objects, Note]."""
    names = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            return [*names, node.id]
        else:
            return names
