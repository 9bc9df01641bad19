"""The suite holds itself to the rule that a test must be able to fail: every test checks
something (an assert, a `pytest.raises`, a mock's or a fixture's assertion, or a helper whose name
says it checks), and no assertion joins a constant into an `or`, which would make it always true."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.code_scan import call_chain

TESTS = Path(__file__).resolve().parent
CHECKING_PREFIXES = ("assert", "expect", "check", "raises", "wait_until", "wait_for")


def _test_functions() -> list[tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                found.append((path, node))
    return found


def _checks_something(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            names = call_chain(node)
            if names and names[0].startswith(CHECKING_PREFIXES):
                return True
    # A fixture that asserts on exit (django_assert_max_num_queries) counts when the test uses it.
    return any(arg.arg.startswith("django_assert") for arg in function.args.args)


def test_every_test_checks_something() -> None:
    empty = [
        f"{path.relative_to(TESTS.parent)}::{function.name}"
        for path, function in _test_functions()
        if not _checks_something(function)
    ]
    assert empty == []


def test_no_assertion_is_made_always_true_by_a_constant_in_an_or() -> None:
    loose = []
    for path, function in _test_functions():
        for node in ast.walk(function):
            if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.BoolOp)):
                continue
            if isinstance(node.test.op, ast.Or) and any(
                isinstance(value, ast.Constant) and value.value for value in node.test.values
            ):
                loose.append(f"{path.relative_to(TESTS.parent)}:{node.lineno}")
    assert loose == []


def test_the_checks_above_can_fail() -> None:
    hollow = ast.parse("def test_x():\n    value = 1 + 1\n")
    function = hollow.body[0]
    assert isinstance(function, ast.FunctionDef)
    assert not _checks_something(function)
    checked = ast.parse("def test_y(mocker):\n    mocker.spy(object, 'x').assert_called_once()\n").body[0]
    assert isinstance(checked, ast.FunctionDef)
    assert _checks_something(checked)
