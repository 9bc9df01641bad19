"""The text policy (config.text): which characters each kind of field takes, and that a refused write
is logged even when what it held is text Postgres cannot store."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Person
from config.errors import status_for
from config.text import (
    InvalidText,
    TextKind,
    escape_unstorable,
    find_unstorable,
    parse_id,
    storable_json,
    text_problem,
)
from curator.providers import CurationRequest, OpenAIProvider, ProviderError
from curator.schemas import ConsolidationPlan
from memory.exceptions import InvalidNote
from memory.models import Note, Revision
from memory.package_format import FORMAT
from memory.services import Actor, append_observation, remember
from tests.curator.chat_server import Script, chat_server
from tests.support.factories import note_fields

ID, LINE, TEXT = TextKind.IDENTIFIER, TextKind.LINE, TextKind.TEXT

# (character, taken by IDENTIFIER, LINE, TEXT)
POLICY = [
    ("\x00", False, False, False),  # NUL: Postgres cannot store it
    ("\ud800", False, False, False),  # a lone surrogate: not Unicode text
    ("\udfff", False, False, False),
    ("\t", False, False, True),
    ("\n", False, False, True),
    ("\r", False, False, True),
    ("\x1b", False, False, False),  # other C0 controls
    ("\x7f", False, False, False),  # DEL
    ("\x85", False, False, False),  # C1 (NEL)
    ("\u2028", False, False, True),  # line separator
    ("\u2029", False, False, True),  # paragraph separator
    ("\u202e", False, True, True),  # RIGHT-TO-LEFT OVERRIDE
    ("\u202a", False, True, True),
    ("\u2066", False, True, True),  # LEFT-TO-RIGHT ISOLATE
    ("\u2069", False, True, True),
    ("\u200f", False, True, True),  # RIGHT-TO-LEFT MARK
    ("\u061c", False, True, True),  # ARABIC LETTER MARK
    ("ש", True, True, True),  # right-to-left letters are text like any other
    ("\u200d", True, True, True),  # ZERO WIDTH JOINER (emoji sequences)
    ("😀", True, True, True),
    ("\ufffd", True, True, True),
]


@pytest.mark.parametrize(("ch", "identifier", "line", "text"), POLICY, ids=[f"U+{ord(p[0]):04X}" for p in POLICY])
def test_each_kind_of_field_takes_what_the_policy_says(ch, identifier, line, text):
    value = f"ada{ch}x"
    assert (text_problem(value, ID) is None) == identifier
    assert (text_problem(value, LINE) is None) == line
    assert (text_problem(value, TEXT) is None) == text


def test_a_refusal_names_the_character_and_where_it_is():
    assert text_problem("Oslo\x00", TEXT) == (
        "contains a NUL character (U+0000) at position 4, which cannot be stored; remove it."
    )
    assert "(U+202E) at position 3" in text_problem("ada\u202e", ID)


def nested(depth: int) -> list:
    value: list = ["deep"]
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"a": ["ok", {"b": "x\x00"}]}, "a[1].b"),
        ({"a\ud800": 1}, "a\\ud800"),
        ({"n": 10**19}, "n"),
        ({"n": float("inf")}, "n"),
        ({"n": nested(40)}, "n" + "[0]" * 32),
    ],
)
def test_a_document_is_refused_at_the_first_place_no_field_could_take(document, field):
    problem = find_unstorable(document)
    assert problem is not None
    assert problem.field == field


def test_a_document_within_the_rules_passes():
    assert find_unstorable({"content": "Line one\nline\ttwo ש\u202e", "n": -(2**63) + 1, "x": 1.5, "ok": None}) is None


def test_escaping_makes_any_text_storable_and_visible():
    assert escape_unstorable("a\x00b\ud800c\x1bd\te\n") == "a\\u0000b\\ud800c\\u001bd\te\n"
    assert storable_json({"k\x00": ["v\ud800", 10**30, float("nan")]}, max_chars=10) == {
        "k\\u0000": ["v\\ud800", "1000000000000000000000000000000… (a number out of range)", "nan"]
    }
    assert storable_json("x" * 20, max_chars=5) == "xxxxx… (clipped; 20 characters)"


@pytest.mark.parametrize("raw", ["²", "٣", "1e20", "-1", "0", str(2**63), " 1", "1 ", ""])
def test_an_id_in_a_query_is_ascii_digits_within_64_bits(raw):
    with pytest.raises(InvalidText) as refused:
        parse_id(raw, field="note")
    assert refused.value.field == "note"


def test_an_id_in_a_query_parses():
    assert parse_id(str(2**63 - 1), field="note") == 2**63 - 1


# --- the write path, as the curator and the lens reach it (no HTTP boundary in front) -----------


@pytest.mark.parametrize(
    ("field", "value", "escaped"),
    [
        ("description", "Where\x00Ada lives", "Where\\u0000Ada lives"),
        ("description", "Where\ud800Ada lives", "Where\\ud800Ada lives"),
        ("content", "Ada\x00lives in Oslo.", "Ada\\u0000lives in Oslo."),
        ("content", "Ada\udc00lives in Oslo.", "Ada\\udc00lives in Oslo."),
        ("key", "home\x00city", "home\\u0000city"),
    ],
)
def test_a_refused_write_holding_unstorable_text_is_logged_escaped(tenant, person, actor, field, value, escaped):
    with pytest.raises(InvalidNote) as refused:
        remember(team=tenant.team, person=person, actor=actor, **note_fields(**{field: value}))
    assert (refused.value.field, status_for(refused.value)) == (field, 400)
    assert not Note.objects.exists()
    revision = Revision.objects.get(action=Revision.Action.REFUSED)
    assert revision.after[field] == escaped
    assert revision.bank_ref == "user:ada"
    assert field in revision.reason


def test_an_observation_the_curator_could_not_store_is_refused_and_logged(tenant, person):
    curator = Actor(Revision.Actor.CURATOR, "curate_conversation")
    with pytest.raises(InvalidNote):
        append_observation(team=tenant.team, person=person, actor=curator, category="home", observation="Oslo\x00")
    revision = Revision.objects.get(action=Revision.Action.REFUSED)
    assert (revision.actor, revision.after["observation"]) == ("curator", "Oslo\\u0000")


# --- the policy through the API -------------------------------------------------------------------

REMEMBER = {"person": "ada", "key": "home-city", "description": "Where Ada lives", "content": "Ada lives in Oslo."}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("content", "Ada lives in \u202eolsO\u202c.\n\tSince 2020.\r\n"),  # bidi, tab and line breaks: text
        ("description", "Where Ada lives \u2067\u05e9\u05dc\u05d5\u05dd\u2069"),  # bidi in one line of text
        ("person", "ada@example.com"),
        ("person", "עדה"),
    ],
)
def test_free_text_keeps_bidi_controls_and_line_breaks(api, field, value):
    response = api.post("/api/v1/tools/remember", {**REMEMBER, field: value}, format="json")
    assert response.status_code == 200, response.json()
    note = Note.objects.get()
    stored = note.bank.person.external_id if field == "person" else getattr(note, field)
    assert stored == value  # stored as sent, never trimmed or rewritten


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("person", "ada\u202e"),
        ("person", "ada\n"),
        ("key", "home\u2066city"),
        ("key", "home\tcity"),
        ("category", "pre\u200ffs"),
        ("scope", "project:apollo\u202e"),
        ("description", "Where Ada\tlives"),
        ("description", "Where Ada\u2028lives"),
        ("content", "Ada\x07lives"),
    ],
)
def test_ids_refuse_bidi_and_control_characters_and_lines_refuse_breaks(api, tenant, field, value):
    response = api.post("/api/v1/tools/remember", {**REMEMBER, field: value}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid", field)
    assert error["message"].startswith(f"{field}: contains a ")
    assert not Note.objects.exists()
    assert not Person.objects.exists()
    assert Revision.objects.filter(team=tenant.team, action=Revision.Action.REFUSED).count() == 1


def test_register_person_refuses_a_bidi_id_and_a_two_line_display_name(api):
    assert api.post("/api/v1/people", {"person": "a\u202eb"}, format="json").json()["error"]["field"] == "person"
    answer = api.post("/api/v1/people", {"person": "ada", "display_name": "Ada\nLovelace"}, format="json")
    assert answer.json()["error"]["field"] == "display_name"
    assert not Person.objects.exists()


# --- imports from the command line -----------------------------------------------------------------


def test_import_memories_refuses_a_package_holding_a_nul_and_logs_it(tenant, tmp_path):
    package = {
        "format": FORMAT, "version": 1,
        "banks": [{"kind": "global", "person": "ada", "scope": "",
                   "notes": [{"key": "home-city", "description": "Where Ada lives", "content": "Oslo\u0000"}]}],
    }  # fmt: skip
    path = tmp_path / "package.json"
    path.write_text(json.dumps(package))
    with pytest.raises(CommandError, match=r"banks\[0\]\.notes\[0\]\.content contains a NUL"):
        call_command("import_memories", str(path), "--team", tenant.team.slug, stdout=StringIO())
    assert not Note.objects.exists()
    assert not Person.objects.exists()
    revision = Revision.objects.get(action=Revision.Action.REFUSED)
    assert revision.actor == Revision.Actor.IMPORT
    assert revision.after["refused"] == {"banks[0].notes[0].content": "Oslo\\u0000"}


def test_import_memories_refuses_a_package_nested_past_the_parser(tenant, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CommandError, match="nested too deeply"):
        call_command("import_memories", str(path), "--team", tenant.team.slug, stdout=StringIO())


# --- what an LLM answers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan", "where"),
    [
        ({"operations": [], "summary": "Ada lives in Oslo\u0000"}, "summary contains a NUL"),
        ({"operations": [{"op": "forget", "key": "home\u0085", "reason": "moved"}]}, "operations[0].key contains"),
        # pydantic's JSON parser refuses a lone surrogate escape itself.
        ({"operations": [{"op": "forget", "key": "home\ud800", "reason": "moved"}]}, "Invalid JSON"),
        ({"operations": [{"op": "append_daily", "text": "ran\u001b[31m"}]}, "operations[0].text contains"),
    ],
)
def test_an_llm_plan_holding_unstorable_text_is_refused_whole(plan, where):
    with (
        chat_server(Script(replies=[(200, json.dumps(plan))])) as url,
        pytest.raises(ProviderError, match="not a valid CuratorPlan") as refused,
    ):
        OpenAIProvider(base_url=url, api_key="sk-test", model="m", timeout=2, max_retries=0).curate(
            CurationRequest(messages=[], digest="", summary="", today="2026-11-30")
        )
    assert where in str(refused.value)
    assert "\x00" not in str(refused.value)  # the message names the character; it never carries it


def test_a_consolidation_plan_holding_unstorable_text_is_refused_whole():
    with pytest.raises(ValueError, match=r"forgets\[0\]\.reason contains a NUL"):
        ConsolidationPlan.model_validate({"forgets": [{"key": "a", "reason": "dup\x00"}]})
