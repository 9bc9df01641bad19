"""config.prepared: a read built once as a queryset, run again with other values, reads what the
queryset reads, and refuses what it could not prepare."""

from __future__ import annotations

import uuid

import pytest
from django.db import DataError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext, override_settings

from config.prepared import Prepared, run_together, statement_cursor
from memory.models import Bank, Note
from memory.services import remember
from tests.support.factories import note_fields

pytestmark = pytest.mark.django_db


def _by_key() -> tuple[Prepared[Note], list[int]]:
    built: list[int] = []

    def build(team_id, bank_id, key):
        built.append(1)
        return Note.objects.filter(team_id=team_id, bank_id=bank_id, key=key).order_by("pk")[:1]

    return Prepared(build, team_id=int, bank_id=int, key=str), built


def test_a_prepared_read_reads_what_its_queryset_reads_every_field_converted(tenant, person, actor, other_tenant):
    first = remember(
        team=tenant.team, person=person, actor=actor,
        scope_refs={"work_item": ["T-1", "T-2"]}, **note_fields(key="coffee", content="Flat white"),
    ).note  # fmt: skip
    second = remember(team=tenant.team, person=person, actor=actor, **note_fields(key="tea", content="Green")).note
    read, built = _by_key()

    for note in (first, second):
        found = read.first(team_id=tenant.team.pk, bank_id=note.bank_id, key=note.key)
        assert found is not None
        fresh = Note.objects.get(pk=note.pk)
        for field in Note._meta.concrete_fields:
            assert getattr(found, field.attname) == getattr(fresh, field.attname), field.attname
        assert found._state.adding is False
    # A JSON field, converted as the queryset converts it.
    assert read.first(team_id=tenant.team.pk, bank_id=first.bank_id, key="coffee").scope_refs == {
        "work_item": ["T-1", "T-2"]
    }
    assert read.first(team_id=other_tenant.team.pk, bank_id=first.bank_id, key="coffee") is None
    assert read.first(team_id=tenant.team.pk, bank_id=first.bank_id, key="coffee' OR '1'='1") is None
    assert len(built) == 1  # built once, however often it runs


def test_values_are_checked_against_their_kinds(tenant):
    read, _ = _by_key()
    with pytest.raises(TypeError, match="key must be str"):
        read.first(team_id=tenant.team.pk, bank_id=1, key=None)
    with pytest.raises(TypeError, match="team_id must be int"):
        read.first(team_id=True, bank_id=1, key="coffee")
    with pytest.raises(TypeError, match="Expected the values"):
        read.first(team_id=tenant.team.pk, key="coffee")


def test_what_would_change_the_sql_is_refused_when_the_read_is_built(tenant):
    with pytest.raises(TypeError, match="only int and str"):
        Prepared(lambda ids: Note.objects.filter(pk__in=ids), ids=list)
    related = Prepared(lambda pk: Note.objects.select_related("bank").filter(pk=pk), pk=int)
    with pytest.raises(ValueError, match="own fields only"):
        related.all(pk=1)
    unused = Prepared(lambda pk, key: Note.objects.filter(pk=pk), pk=int, key=str)
    with pytest.raises(ValueError, match="does not use key"):
        unused.all(pk=1, key="coffee")


@pytest.mark.django_db(transaction=True)  # outside any transaction, as a request's reads are
def test_a_locking_read_runs_only_inside_a_transaction(tenant, person, actor):
    note = remember(team=tenant.team, person=person, actor=actor, **note_fields()).note
    locking = Prepared(lambda pk: Bank.objects.select_for_update(of=("self",)).filter(pk=pk)[:1], pk=int)
    with pytest.raises(TransactionManagementError):
        locking.first(pk=note.bank_id)
    with transaction.atomic():
        assert locking.first(pk=note.bank_id).pk == note.bank_id


# --- statements Postgres prepares (statement_cursor) -----------------------------------------


def _prepared(marker: str) -> list[tuple[str, int, int]]:
    """This session's prepared statements whose text holds `marker`: (text, generic plans, custom plans)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, %s) > 0",
            [marker],
        )
        return cursor.fetchall()


def test_a_statement_is_prepared_once_and_runs_its_generic_plan_with_each_value(tenant, person, actor, other_tenant):
    keys = ["coffee", "tea", "juice"]
    for key in keys:
        remember(team=tenant.team, person=person, actor=actor, **note_fields(key=key, content=f"about {key}"))
    marker = f"/* prepared-{uuid.uuid4().hex} */"
    sql = f"SELECT content FROM {Note._meta.db_table} WHERE team_id = %(team)s AND key = %(key)s {marker}"

    for key in keys:
        with statement_cursor() as cursor:
            cursor.execute(sql, {"team": tenant.team.pk, "key": key})
            assert cursor.fetchall() == [(f"about {key}",)]  # each call's own value, bound
    with statement_cursor() as cursor:  # scoped by the value: another team's notes are not its
        cursor.execute(sql, {"team": other_tenant.team.pk, "key": "coffee"})
        assert cursor.fetchall() == []

    [(text, generic, custom)] = _prepared(marker)  # one statement, however many values ran through it
    assert "$1" in text  # the values were bound by Postgres, not written in
    assert "%(team)s" not in text
    assert (generic, custom) == (len(keys) + 1, 0)


def test_statements_are_not_prepared_when_prepared_statements_are_off(tenant):
    marker = f"/* unprepared-{uuid.uuid4().hex} */"
    with override_settings(DB_PREPARED_STATEMENTS=False), statement_cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {Note._meta.db_table} WHERE team_id = %s {marker}", [tenant.team.pk])
        assert cursor.fetchall() == [(0,)]
    assert _prepared(marker) == []


def test_statements_run_prepared_are_seen_by_djangos_query_log(tenant):
    marker = f"/* logged-{uuid.uuid4().hex} */"
    with CaptureQueriesContext(connection) as queries, statement_cursor() as cursor:
        cursor.execute(f"SELECT 1 {marker}")
    [logged] = queries.captured_queries  # counted as any query is (the query-count pins rely on it)
    assert marker in logged["sql"]


def test_the_hot_reads_of_a_turn_and_a_search_run_prepared(tenant, person, actor):
    """The conversation search's sync and hits, the notes' banks and contents: each is prepared once
    and runs its generic plan every time (a read moved back to Django's cursor, which Postgres
    parses and plans at every call, fails this)."""
    from conversations.composer import compose
    from conversations.queries import search_messages
    from conversations.services import record_message, start_conversation

    remember(team=tenant.team, person=person, actor=actor, **note_fields(key="coffee", content="Flat white"))
    conversation = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    for text in ("I drink flat whites at the harbour", "Noted", "Where do I get coffee?"):
        message = record_message(conversation=conversation, role="user", content=text)
    before = {text: generic for text, generic, _ in _prepared("")}
    for _ in range(2):
        assert [
            hit.message.content for hit in search_messages(agent=tenant.agent, person=person, query="flat whites")
        ] == ["I drink flat whites at the harbour"]
    compose(team=tenant.team, agent=tenant.agent, person=person, conversation=conversation, message=message)
    ran = {text.lstrip(): (generic - before.get(text, 0), custom) for text, generic, custom in _prepared("")}
    for start, times in (
        ("WITH probed AS MATERIALIZED", 2),  # the pair's sync, at each search
        ('SELECT "id", "team_id", "conversation_id"', 2),  # the hits' messages
        ("WITH applicable AS", 1),  # the turn's notes
    ):
        found = [counts for text, counts in ran.items() if text.startswith(start)]
        assert found, f"no prepared statement starts {start!r}"
        assert all(custom == 0 for _, custom in found)
        assert sum(generic for generic, _ in found) >= times


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "bound client-side"])
def test_statements_run_together_give_each_its_rows_and_set_local_lasts_until_the_last(tenant, settings, prepared):
    settings.DB_PREPARED_STATEMENTS = prepared
    with transaction.atomic():  # inside a caller's transaction, as a write's statements run
        found = run_together(
            [
                ("SET LOCAL enable_sort = off", None),
                ("SELECT current_setting('enable_sort'), %(team)s::bigint", {"team": tenant.team.pk}),
                ("SET LOCAL enable_sort TO DEFAULT", None),
                ("SELECT id FROM accounts_team WHERE id = %s", [tenant.team.pk]),
            ]
        )
    assert found == [None, [("off", tenant.team.pk)], None, [(tenant.team.pk,)]]
    [[(setting,)]] = run_together([("SELECT current_setting('enable_sort')", None)])
    assert setting == "on"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "bound client-side"])
def test_statements_run_together_commit_or_fail_together_outside_a_transaction(tenant, settings, prepared):
    """Outside an atomic block they are one transaction of their own: a write before a failing
    statement is not kept (the message's UPDATE and INSERT rely on it), and the error is Django's."""
    settings.DB_PREPARED_STATEMENTS = prepared
    team = tenant.team
    with pytest.raises(DataError):
        run_together(
            [
                ("UPDATE accounts_team SET name = %s WHERE id = %s", ["Renamed", team.pk]),
                ("SELECT 1 / %s::int", [0]),
            ]
        )
    team.refresh_from_db()
    assert team.name != "Renamed"
    assert connection.get_autocommit()  # the connection is usable, and back in autocommit
    run_together([("UPDATE accounts_team SET name = %s WHERE id = %s", ["Renamed", team.pk]), ("SELECT 1", None)])
    team.refresh_from_db()
    assert team.name == "Renamed"


def test_a_failure_among_statements_run_together_inside_a_transaction_rolls_back_to_its_savepoint(tenant):
    team = tenant.team
    with transaction.atomic():
        run_together([("UPDATE accounts_team SET name = %s WHERE id = %s", ["Kept", team.pk]), ("SELECT 1", None)])
        with pytest.raises(DataError), transaction.atomic():
            run_together(
                [
                    ("UPDATE accounts_team SET name = %s WHERE id = %s", ["Lost", team.pk]),
                    ("SELECT 1 / %s::int", [0]),
                ]
            )
        # The transaction goes on from its savepoint: the first write is there, the second is not.
        [[(name,)]] = run_together([("SELECT name FROM accounts_team WHERE id = %s", [team.pk])])
    assert name == "Kept"
