"""Hot reads whose SQL the ORM builds once per process, then runs with other values.

Django builds a queryset's SQL anew every time it runs: for the reads on every API call (the bank
a write locks, a turn a reply names, the conversation a turn continues) that took 0.3-0.5 ms of CPU
each on two cores, several times the round trip itself. A `Prepared` read is written as a queryset,
built once with stand-in values (`build(**stand_ins)`), and its SQL kept; each call runs that SQL
with the caller's values in the stand-ins' places, and makes the rows into model instances as the
queryset would (Columns: every field, through its database converters, then Model.from_db).
Columns also serves the reads written by hand in SQL (columns_of).

Only what the stand-ins cannot change may be prepared: scalar values (ints and strings) compared
or assigned as they are. A value that changes the SQL itself (None, which becomes IS NULL; a list,
whose length is part of an IN) is refused when the read is built, as is a read of anything but the
model's own fields (select_related, annotations, values()). A read with select_for_update must run
inside a transaction, as the queryset's must.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.backends.utils import CursorWrapper
from django.db.models import Model, QuerySet
from django.db.transaction import TransactionManagementError

from config.replicas import read_connection

_STAND_IN_BASE = -7_340_000_000  # far from any id or count this database holds
Converters = list[tuple[int, list[Any], Any]]  # per column that needs them: its position, converters, expression


@dataclass(frozen=True)
class _Compiled:
    sql: str
    slots: list[tuple[str | None, Any]]  # per parameter: the value's name, or None and a constant
    columns: Columns[Any]  # what each row holds: every field of the model, in order
    locks: bool  # select_for_update


class Prepared[M: Model]:
    """A read of `model` rows built by `build` (a queryset) once; see the module's doc."""

    def __init__(self, build: Callable[..., QuerySet[M]], **kinds: type) -> None:
        for name, kind in kinds.items():
            if kind not in (int, str):
                raise TypeError(f"{name}: only int and str values can be prepared, not {kind.__name__}.")
        self._build = build
        self._kinds = kinds
        self._lock = threading.Lock()
        self._compiled: _Compiled | None = None

    def _stand_ins(self) -> dict[str, Any]:
        return {
            name: _STAND_IN_BASE - index if kind is int else f"\x1fstand-in {index}\x1f"
            for index, (name, kind) in enumerate(self._kinds.items())
        }

    def _compile(self) -> _Compiled:
        compiled = self._compiled
        if compiled is not None:
            return compiled
        with self._lock:
            if self._compiled is not None:
                return self._compiled
            stand_ins = self._stand_ins()
            queryset = self._build(**stand_ins)
            query = queryset.query
            if query.select_related or query.annotations or query.values_select or query.deferred_loading[0]:
                raise ValueError(
                    "A prepared read reads the model's own fields only (no select_related, annotations, values or only)."
                )
            compiler = query.get_compiler(DEFAULT_DB_ALIAS)
            sql, params = compiler.as_sql()
            columns = columns_of(queryset.model)
            selected = [
                getattr(getattr(expression, "target", None), "attname", None) for expression, _, _ in compiler.select
            ]
            if selected != columns.fields:
                raise ValueError("A prepared read must select every field of its model, in order, and nothing else.")
            by_value = {value: name for name, value in stand_ins.items()}
            slots: list[tuple[str | None, Any]] = []
            for value in params:
                if isinstance(value, (list, tuple, dict, set)):
                    raise ValueError("A prepared read cannot take a list: its length is part of the SQL.")
                stand_in = isinstance(value, (int, str)) and value in by_value
                slots.append((by_value[value], None) if stand_in else (None, value))
            missing = set(stand_ins) - {name for name, _ in slots}
            if missing:
                raise ValueError(
                    f"The read does not use {', '.join(sorted(missing))} as a value (None or a list would change its SQL)."
                )
            self._compiled = _Compiled(sql, slots, columns, bool(query.select_for_update))
            return self._compiled

    def all(self, **values: Any) -> list[M]:
        """The rows the queryset would return for these values."""
        if values.keys() != self._kinds.keys():
            raise TypeError(f"Expected the values {', '.join(self._kinds)}; got {', '.join(values)}.")
        for name, value in values.items():
            if not isinstance(value, self._kinds[name]) or isinstance(value, bool):
                raise TypeError(f"{name} must be {self._kinds[name].__name__}, not {type(value).__name__}.")
        compiled = self._compile()
        if compiled.locks and connection.get_autocommit():
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        params = [values[name] if name is not None else constant for name, constant in compiled.slots]
        with statement_cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        return [compiled.columns.instance(row) for row in rows]

    def first(self, **values: Any) -> M | None:
        """The first row, or None (the queryset should be sliced to one row: [:1])."""
        rows = self.all(**values)
        return rows[0] if rows else None


@dataclass(frozen=True)
class Columns[T: Model]:
    """Every field of a model as a SELECT written by hand reads it, and how such a row becomes an
    instance: each value through its field's database converters (a JSON field's decoding, for
    one), then Model.from_db, as a queryset would make it."""

    model: type[T]
    table: str  # the model's table, quoted
    select: str  # its columns, quoted, each after the table's alias in the statement when one was given
    fields: list[str]  # the fields' attribute names, in the columns' order
    converters: Converters

    @property
    def width(self) -> int:
        return len(self.fields)

    def instance(self, row: Sequence[Any]) -> T:
        """The instance of these columns' values (a row, or the part of one they take)."""
        values = list(row)
        read_from = read_connection()
        for position, functions, expression in self.converters:
            for function in functions:
                values[position] = function(values[position], expression, read_from)
        return self.model.from_db(read_from.alias, self.fields, values)


_columns: dict[tuple[type[Model], str], Columns[Any]] = {}


def statement_cursor() -> CursorWrapper:
    """A cursor of the reads' connection (the primary's, or a replica's inside config.replicas.
    reading_from) whose statements Postgres prepares once per connection
    and runs with a generic plan (DB_PREPARED_STATEMENTS, see the settings): for hot statements
    whose SQL is fixed, as a Prepared read's or one written by hand is. It is Django's cursor
    (execute wrappers, query logging, error wrapping) over a psycopg cursor that binds its values
    server-side; Django's own bind client-side, and are never prepared.

    One statement per execute (a prepared statement cannot hold several), and every value's type
    must be clear to Postgres without its text: `%s::bigint[]` for an array sent as text. A
    statement's generic plan is chosen without its values: a statement run through here should
    have one plan that suits every value (tests/config/test_prepared.py checks the hot ones')."""
    using = read_connection()
    cursor = using.cursor()
    if settings.DB_PREPARED_STATEMENTS:
        cursor.cursor.close()  # Django's client-side one, never used
        cursor.cursor = psycopg.Cursor(using.connection)
    return cursor


Params = Sequence[Any] | Mapping[str, Any] | None


def run_together(statements: Sequence[tuple[str, Params]]) -> list[list[tuple[Any, ...]] | None]:
    """Each statement's rows (None for one that returns none, as SET), the statements sent in one
    round trip and run in one transaction (outside an atomic block, one of their own: SET LOCAL
    lasts until the last of them). Prepared (statement_cursor), they go through psycopg's pipeline;
    with DB_PREPARED_STATEMENTS off, as one string of statements bound client-side."""
    found: list[list[tuple[Any, ...]] | None] = []
    using = read_connection()
    if not settings.DB_PREPARED_STATEMENTS:
        with using.cursor() as cursor:
            cursor.execute(";".join(cursor.mogrify(sql, params) for sql, params in statements))
            for index in range(len(statements)):
                if index:
                    cursor.nextset()
                found.append(cursor.fetchall() if cursor.description is not None else None)
        return found
    if len(statements) == 1:
        with statement_cursor() as cursor:
            cursor.execute(*statements[0])
            return [cursor.fetchall() if cursor.description is not None else None]
    cursors = []
    try:
        using.ensure_connection()
        with using.wrap_database_errors, using.connection.pipeline():
            for sql, params in statements:
                cursor = statement_cursor()
                cursors.append(cursor)
                cursor.execute(sql, params)
        for cursor in cursors:
            found.append(cursor.fetchall() if cursor.description is not None else None)
    finally:
        for cursor in cursors:
            cursor.close()
    return found


def columns_of[T: Model](model: type[T], alias: str = "") -> Columns[T]:
    """The model's Columns (see Columns), kept once made; `alias`: the table's in the statement."""
    found = _columns.get((model, alias))
    if found is None:
        quote = connection.ops.quote_name
        concrete = model._meta.concrete_fields
        prefix = f"{alias}." if alias else ""
        converters: Converters = []
        for position, field in enumerate(concrete):
            column = field.get_col(model._meta.db_table)
            functions = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if functions:
                converters.append((position, functions, column))
        found = Columns(
            model,
            quote(model._meta.db_table),
            ", ".join(f"{prefix}{quote(str(field.column))}" for field in concrete),
            [field.attname for field in concrete],
            converters,
        )
        _columns[(model, alias)] = found
    return found


@dataclass(frozen=True)
class Insert:
    """The INSERT of one new row written by hand, as `instance.save(force_insert=True)` would send it:
    every concrete field but the auto primary key, each value as the field saves it (Field.pre_save,
    then Field.get_db_prep_save: auto_now_add, JSON, choices and all), returning the primary key.
    For a statement that inserts together with another (a data-modifying WITH) in one round trip."""

    sql: str
    params: list[Any]

    @classmethod
    def of(cls, instance: Model) -> Insert:
        meta = instance._meta
        quote = connection.ops.quote_name
        fields = [field for field in meta.local_concrete_fields if field is not meta.auto_field]
        values = [field.get_db_prep_save(field.pre_save(instance, add=True), connection) for field in fields]
        sql = (
            f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(str(field.column)) for field in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING {quote(str(meta.pk.column))}"
        )
        return cls(sql, values)

    @staticmethod
    def inserted(instance: Model, pk: Any) -> None:
        """Mark `instance` as the row just inserted with this primary key, as save() would."""
        instance.pk = pk
        instance._state.adding = False
        instance._state.db = connection.alias
