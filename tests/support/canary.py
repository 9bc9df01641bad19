"""Find a string anywhere the project stores text: every text, character and JSON column of every
table that belongs to one of the project's own apps.

Erasure tests plant a unique canary in what a person says, erase it, and then ask this module
where the canary still is. Reading `information_schema` rather than the models means a column a
model forgot to declare, an auto-created join table or a later migration's table is scanned too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection

PROJECT_APPS = ("config", "accounts", "memory", "conversations", "curator")
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb")


@dataclass(frozen=True)
class Sighting:
    table: str
    column: str
    count: int

    def __str__(self) -> str:
        return f"{self.table}.{self.column} ({self.count} rows)"


def project_text_columns() -> list[tuple[str, str]]:
    """(table, column) for every text-like column of the project's apps' tables."""
    prefixes = tuple(f"{app}_" for app in PROJECT_APPS)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name, c.column_name
            FROM information_schema.columns c
            JOIN information_schema.tables t
              ON t.table_schema = c.table_schema AND t.table_name = c.table_name
            WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
              AND c.data_type = ANY(%s)
            ORDER BY c.table_name, c.ordinal_position
            """,
            [list(TEXT_TYPES)],
        )
        rows = cursor.fetchall()
    return [(table, column) for table, column in rows if table.startswith(prefixes)]


def find_text(needle: str) -> list[Sighting]:
    """Every project column holding `needle` (case-insensitively), with how many rows hold it."""
    if not needle:
        raise ValueError("find_text needs a non-empty string to look for")
    qn = connection.ops.quote_name
    sightings = []
    with connection.cursor() as cursor:
        for table, column in project_text_columns():
            cursor.execute(
                f"SELECT count(*) FROM {qn(table)} WHERE strpos(lower({qn(column)}::text), lower(%s)) > 0",
                [needle],
            )
            (found,) = cursor.fetchone()
            if found:
                sightings.append(Sighting(table, column, found))
    return sightings


@contextmanager
def probing() -> Iterator[None]:
    """Look for a canary through the read tools without leaving it behind.

    The reads a test makes to hunt for a canary are recorded by the retrieval audit with the
    canary in their query: they are the test's own words, not something the system kept. Inside
    this block they are written and then removed, so a later `find_text` judges only what the
    erasure left."""
    from memory.models import Read
    from memory.services.reads import flush_reads

    flush_reads()
    last = Read.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    try:
        yield
    finally:
        flush_reads()
        Read.objects.filter(pk__gt=last).delete()
