"""Project hygiene that a fresh machine depends on."""

import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith(("#", "-")):  # "-e ./clients/python" is this repository's client
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def test_every_dependency_is_pinned_within_its_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _locked()
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        requirement = Requirement(spec)
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in requirements.lock; run `make lock`"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {requirement.specifier}"


def test_the_python_version_is_pinned_to_312():
    assert (ROOT / ".python-version").read_text().strip().startswith("3.12")
    assert sys.version_info[:2] == (3, 12)


def test_the_openapi_schema_validates_without_warnings():
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_deploy_checks_are_clean_with_production_settings():
    import os

    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},  # set for Playwright only
        "DEBUG": "0",
        "SECRET_KEY": "x" * 20 + "a-long-random-production-secret-for-the-check-0123456789",
        "SECURE_SSL_REDIRECT": "1",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_PRELOAD": "1",
        "ALLOWED_HOSTS": "mnemo.example.com",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


CLIENT = ROOT / "clients" / "python"


def _project_modules() -> list[Path]:
    # the client declares its own dependencies; mutants/ is `make mutate`'s scratch copy (git-ignored)
    skip = {".venv", "var", "tests", "node_modules", "clients", "mutants"}
    return [
        path
        for path in ROOT.rglob("*.py")
        if not any(part in skip or part.startswith(("var-", ".")) for part in path.relative_to(ROOT).parts)
    ]


def _undeclared_imports(modules: list[Path], local: set[str], declared: Callable[[Path], set[str]]) -> dict[str, str]:
    import ast
    from importlib.metadata import packages_distributions

    distributions = packages_distributions()
    missing: dict[str, str] = {}
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in local:
                    continue
                owners = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
                if not owners & declared(path):
                    missing.setdefault(top, str(path.relative_to(ROOT)))
    return missing


def _names(specs: list[str]) -> set[str]:
    return {Requirement(spec).name.lower().replace("_", "-") for spec in specs}


def test_every_third_party_import_is_a_declared_dependency():
    """A package used by the code but missing from pyproject works here and fails on a fresh machine."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [spec for name, specs in project["optional-dependencies"].items() if name != "dev" for spec in specs]
    service = _names(project["dependencies"]) | _names(extras)  # an extra's import is lazy, behind its setting
    examples = service | _names(project["optional-dependencies"]["dev"])  # examples run on a dev install
    local = {p.name for p in ROOT.iterdir() if p.is_dir()} | {p.stem for p in ROOT.glob("*.py")} | {"mnemo_client"}
    missing = _undeclared_imports(
        _project_modules(), local, lambda path: examples if path.is_relative_to(ROOT / "examples") else service
    )
    assert not missing, f"imported but not declared in pyproject.toml dependencies: {missing}"


def test_the_client_package_declares_what_it_imports_and_the_lock_pins_it():
    client = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    specs = client["dependencies"] + [spec for extra in client["optional-dependencies"].values() for spec in extra]
    modules = sorted((CLIENT / "mnemo_client").rglob("*.py"))
    assert modules
    missing = _undeclared_imports(modules, {"mnemo_client"}, lambda path: _names(specs))
    assert not missing, f"imported by mnemo_client but not declared in clients/python/pyproject.toml: {missing}"

    pins = _locked()
    for spec in specs:
        requirement = Requirement(spec)
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} (clients/python) is not pinned in requirements.lock"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {requirement.specifier}"
    assert "-e ./clients/python" in (ROOT / "requirements.lock").read_text().splitlines()
