"""Memory packages: import (through the write path, idempotent, refusals reported) and export."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import Person
from memory.exceptions import InvalidNote
from memory.models import Bank, Note, OntologyNode, Revision
from memory.package_format import FORMAT
from memory.packages import export_person, import_package, parse_package_text
from memory.services import Actor, remember
from tests.support.factories import PersonFactory

pytestmark = pytest.mark.django_db


def import_actor() -> Actor:
    return Actor(Revision.Actor.IMPORT, "test")


def note(key: str, content: str = "Some content.", **extra: object) -> dict[str, object]:
    return {"key": key, "description": f"About {key}", "content": content, **extra}


def package(*banks: dict[str, object]) -> dict[str, object]:
    return {"format": FORMAT, "version": 1, "banks": list(banks)}


def global_bank(person: str, *notes: dict[str, object]) -> dict[str, object]:
    return {"id": f"user:{person}", "kind": "global", "person": person, "scope": "", "notes": list(notes)}


@pytest.fixture
def ada_memories(tenant, person, actor):
    """Ada's notes in three banks, plus notes that are not hers: Bob's, a shared bank's, another team's."""
    team, ada = tenant.team, person
    bob = PersonFactory(team=team, external_id="bob")
    remember(team=team, person=ada, actor=actor, key="home-city", description="Where Ada lives", content="Oslo.")
    remember(
        team=team, person=ada, actor=actor, key="home-city", description="Where Ada lives", content="Bergen, since May."
    )
    remember(
        team=team, person=ada, actor=actor, key="prefers-norwegian", description="Language", content="Answer in Norwegian.",
        kind=Note.Kind.PREFERENCE, category="preferences",
    )  # fmt: skip
    remember(
        team=team, person=ada, actor=actor, key="deadline", description="Apollo deadline", content="Friday.",
        scope="project:apollo", bank="private", scope_refs={"project": ["apollo"]},
    )  # fmt: skip
    remember(
        team=team, person=ada, actor=actor, key="team-standup", description="Standup", content="At nine.",
        scope="project:apollo", bank="shared",
    )  # fmt: skip
    remember(team=team, person=bob, actor=actor, key="bob-secret", description="Bob's", content="Bob only.")
    return ada


def test_export_then_import_into_another_team_reproduces_the_notes(tenant, other_tenant, ada_memories):
    exported = tenant.client.get("/api/v1/exports", {"person": "ada"})
    assert exported.status_code == 200
    body = exported.json()
    assert (body["format"], body["version"]) == (FORMAT, 2)
    # The shared bank's note was written about Ada, so her export holds it (and says so).
    assert [bank["id"] for bank in body["banks"]] == ["user:ada", "user:ada:project:apollo", "scope:project:apollo"]
    assert body["banks"][2]["about"] == "ada"

    imported = other_tenant.client.post("/api/v1/imports", body, format="json")
    assert imported.status_code == 200
    assert imported.json() == {
        "created": 4, "updated": 0, "unchanged": 0, "refused": 0, "refusals": [], "evicted": [],
    }  # fmt: skip

    def shape(team):
        return sorted(
            (n.bank.address, n.bank.kind, n.key, n.description, n.content, n.kind, n.category, n.scope_refs)
            for n in Note.objects.filter(team=team).exclude(bank__kind=Bank.Kind.SHARED).select_related("bank")
            if n.bank.person.external_id == "ada"
        )

    assert shape(other_tenant.team) == shape(tenant.team)
    copied = Note.objects.filter(team=other_tenant.team)
    assert {n.source for n in copied} == {Note.Source.IMPORT}
    creates = Revision.objects.filter(team=other_tenant.team, action=Revision.Action.CREATE)
    assert creates.count() == 4
    assert {(r.actor, r.actor_ref) for r in creates} == {(Revision.Actor.IMPORT, other_tenant.agent.slug)}
    assert Person.objects.filter(team=other_tenant.team, external_id="ada").exists()


def test_importing_the_same_package_twice_is_unchanged_the_second_time(tenant):
    data = package(
        global_bank("ada", note("home-city", "Oslo."), note("Likes Tea", "Green tea.", kind="preference")),
        {"kind": "shared", "person": None, "scope": "project:apollo", "notes": [note("standup", "At nine.")]},
        {"kind": "private", "person": "ada", "scope": "project:apollo", "notes": [note("deadline", "Friday.")]},
    )
    first = import_package(team=tenant.team, data=data, actor=import_actor(), agent=None)
    assert (first.created, first.updated, first.unchanged, first.refused) == (4, 0, 0, 0)
    revisions = Revision.objects.count()
    updated_at = dict(Note.objects.values_list("key", "updated_at"))

    second = import_package(team=tenant.team, data=data, actor=import_actor(), agent=None)
    assert (second.created, second.updated, second.unchanged, second.refused) == (0, 0, 4, 0)
    assert Revision.objects.count() == revisions
    assert Note.objects.count() == 4
    assert dict(Note.objects.values_list("key", "updated_at")) == updated_at
    assert set(Bank.objects.filter(team=tenant.team).values_list("address", flat=True)) == {
        "user:ada", "scope:project:apollo", "user:ada:project:apollo",
    }  # fmt: skip


def test_a_changed_note_is_an_update(tenant):
    import_package(
        team=tenant.team, data=package(global_bank("ada", note("home-city", "Oslo."))), actor=import_actor(), agent=None
    )
    report = import_package(
        team=tenant.team,
        data=package(global_bank("ada", note("home-city", "Bergen."))),
        actor=import_actor(),
        agent=None,
    )
    assert (report.created, report.updated) == (0, 1)
    update = Revision.objects.get(action=Revision.Action.UPDATE)
    assert (update.before["content"], update.after["content"], update.actor) == ("Oslo.", "Bergen.", "import")


def test_a_refused_note_is_reported_and_logged_while_the_others_import(tenant):
    data = package(
        global_bank(
            "ada",
            note("first", "Fine."),
            note("too-long", "x" * 2001),
            note("unknown-tag", "Tagged.", semantics=["no-such-id"]),
            note("last", "Also fine."),
        )
    )
    progress: list[tuple[int, int]] = []
    report = import_package(
        team=tenant.team, data=data, actor=import_actor(), agent=None, progress=lambda d, t: progress.append((d, t))
    )
    assert (report.created, report.refused) == (2, 2)
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert sorted(Note.objects.values_list("key", flat=True)) == ["first", "last"]
    too_long, unknown = report.refusals
    assert (too_long.bank, too_long.key, too_long.code) == ("user:ada", "too-long", "too_long")
    assert "2001 characters; the limit is 2000" in too_long.message
    assert (unknown.code, unknown.key) == ("unknown_ontology_id", "unknown-tag")
    assert "Use an exact ontology id." in unknown.message
    refused = Revision.objects.get(action=Revision.Action.REFUSED, note_key="too-long")
    assert (refused.actor, refused.bank_ref) == (Revision.Actor.IMPORT, "user:ada")
    assert refused.after["content_length"] == 2001


def test_semantics_known_to_the_team_import(tenant):
    OntologyNode.objects.create(team=tenant.team, node_id="language", label="Language")
    data = package(global_bank("ada", note("prefers-norwegian", "Norwegian.", semantics=["language"])))
    report = import_package(team=tenant.team, data=data, actor=import_actor(), agent=None)
    assert report.created == 1
    assert Note.objects.get().semantics == ["language"]


def test_malformed_notes_and_banks_are_refused_one_by_one(tenant):
    past = (timezone.now() - timedelta(days=1)).isoformat()
    future = (timezone.now() + timedelta(days=1)).isoformat()
    data = package(
        global_bank(
            "ada",
            {"key": "no-content", "description": "Missing content"},
            note("number-content", 42),
            note("expired", expires_at=past),
            note("bad-date", expires_at="tomorrow"),
            note("expires-later", expires_at=future),
        ),
        {"kind": "private", "person": "", "scope": "project:x", "notes": [note("no-person")]},
        {"kind": "team", "person": "ada", "scope": "", "notes": [note("bad-kind")]},
        {"id": "user:bob", "kind": "global", "person": "ada", "scope": "", "notes": [note("wrong-id")]},
    )
    report = import_package(team=tenant.team, data=data, actor=import_actor(), agent=None)
    assert report.created == 1
    assert Note.objects.get().key == "expires-later"
    assert {(r.key, r.code) for r in report.refusals} == {
        ("no-content", "invalid"), ("number-content", "invalid"), ("expired", "invalid"), ("bad-date", "invalid"),
        ("no-person", "invalid"), ("bad-kind", "invalid"), ("wrong-id", "invalid"),
    }  # fmt: skip


def test_jsonl_is_accepted(tenant):
    text = "\n".join(
        json.dumps(line)
        for line in [
            {"format": FORMAT, "version": 1},
            {"bank_kind": "global", "person": "ada", "scope": "", **note("home-city", "Oslo.")},
            {"bank_kind": "shared", "person": None, "scope": "project:apollo", **note("standup", "At nine.")},
            {"bank_kind": "private", "person": "ada", "scope": "project:apollo", "bank": "user:ada:project:apollo",
             **note("deadline", "Friday.")},
        ]
    )  # fmt: skip
    data = parse_package_text(text + "\n\n")
    assert isinstance(data, list)
    report = import_package(team=tenant.team, data=data, actor=import_actor(), agent=None)
    assert (report.created, report.refused) == (3, 0)
    assert sorted(Note.objects.values_list("bank__address", "key")) == [
        ("scope:project:apollo", "standup"), ("user:ada", "home-city"), ("user:ada:project:apollo", "deadline"),
    ]  # fmt: skip

    response = tenant.client.post("/api/v1/imports", data, format="json")
    assert response.status_code == 200
    assert response.json()["unchanged"] == 3


def test_a_header_alone_is_an_empty_package(tenant):
    data = parse_package_text(json.dumps({"format": FORMAT, "version": 1}))
    assert import_package(team=tenant.team, data=data, actor=import_actor(), agent=None).total == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "empty"),
        ("not json at all", "Line 1 is not valid JSON"),
        ('{"format": "mnemo.memory-package", "version": 1}\n[1, 2]', "Line 2 is not a JSON object"),
        ('"a string"', "JSON str"),
    ],
)
def test_malformed_text_is_invalid(text, expected):
    with pytest.raises(InvalidNote) as refused:
        parse_package_text(text)
    assert expected in refused.value.message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"format": "other-format", "version": 1, "banks": []}, 'expected "format": "mnemo.memory-package"'),
        ({"format": FORMAT, "version": 3, "banks": []}, "reads versions 1 and 2"),
        ({"format": FORMAT, "version": True, "banks": []}, "reads versions 1 and 2"),
        ({"banks": []}, 'expected "format": "mnemo.memory-package"'),
        ({"format": FORMAT, "version": 1, "banks": {}}, '"banks" must be a list'),
        ({"format": FORMAT, "version": 1, "banks": [{"kind": "global", "notes": ["x"]}]}, "is not a JSON object"),
        ([{"format": FORMAT, "version": 3}], "reads versions 1 and 2"),
        ([], "empty"),
    ],
)
def test_a_bad_package_is_a_400_and_writes_nothing(tenant, body, expected):
    response = tenant.client.post("/api/v1/imports", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert expected in error["message"]
    assert not Note.objects.exists()
    assert not Person.objects.exists()


def test_a_malformed_bank_anywhere_writes_nothing(tenant):
    data = {"format": FORMAT, "version": 1, "banks": [global_bank("ada", note("a")), "not a bank"]}
    with pytest.raises(InvalidNote):
        import_package(team=tenant.team, data=data, actor=import_actor(), agent=None)
    assert not Note.objects.exists()


def test_the_export_holds_the_persons_notes_and_revisions_and_nothing_else(tenant, other_tenant, ada_memories):
    other_ada = PersonFactory(team=other_tenant.team, external_id="ada")
    remember(
        team=other_tenant.team, person=other_ada, actor=Actor.for_agent(other_tenant.agent), key="other-team-note",
        description="Elsewhere", content="Another team's Ada.",
    )  # fmt: skip
    exported = export_person(team=tenant.team, person=ada_memories)
    json.dumps(exported)  # serialisable as it stands

    keys = {(bank["id"], n["key"]) for bank in exported["banks"] for n in bank["notes"]}
    assert keys == {
        ("user:ada", "home-city"),
        ("user:ada", "prefers-norwegian"),
        ("user:ada:project:apollo", "deadline"),
        ("scope:project:apollo", "team-standup"),  # written about her in a shared bank
    }
    assert {(bank["person"], bank.get("about")) for bank in exported["banks"]} == {("ada", None), (None, "ada")}
    assert exported["person"]["id"] == "ada"
    home = next(n for bank in exported["banks"] for n in bank["notes"] if n["key"] == "home-city")
    assert home["content"] == "Bergen, since May."
    assert home["created_at"]
    assert home["updated_at"]

    revisions = exported["revisions"]
    assert [(r["action"], r["note_key"]) for r in revisions] == [
        ("create", "home-city"), ("update", "home-city"), ("create", "prefers-norwegian"), ("create", "deadline"),
        ("create", "team-standup"),
    ]  # fmt: skip
    assert revisions[1]["before"]["content"] == "Oslo."
    text = json.dumps(exported)
    for foreign in ("bob", "Bob only.", "other-team-note", "Another team's Ada."):
        assert foreign not in text


def test_the_export_api_is_tenant_scoped(tenant, other_tenant, ada_memories):
    response = other_tenant.client.get("/api/v1/exports", {"person": "ada"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    missing = tenant.client.get("/api/v1/exports")
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "invalid"
    assert tenant.client.get("/api/v1/exports", {"person": "nobody"}).status_code == 404


def test_the_import_api_writes_only_into_the_callers_team(tenant, other_tenant):
    data = package(global_bank("ada", note("home-city", "Oslo.")))
    assert other_tenant.client.post("/api/v1/imports", data, format="json").status_code == 200
    assert not Note.objects.filter(team=tenant.team).exists()
    assert Note.objects.filter(team=other_tenant.team).count() == 1


def test_the_api_needs_a_key(tenant):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/exports", {"person": "ada"}).status_code == 401
    assert APIClient().post("/api/v1/imports", package(), format="json").status_code == 401
    assert not Note.objects.filter(team=tenant.team).exists()  # the refused import wrote nothing


# --- management commands ----------------------------------------------------------------------


def test_import_memories_command_reports_and_imports(tenant, tmp_path):
    path = tmp_path / "memories.json"
    path.write_text(json.dumps(package(global_bank("ada", note("home-city", "Oslo."), note("huge", "x" * 2001)))))
    out = io.StringIO()
    call_command("import_memories", str(path), "--team", tenant.team.slug, stdout=out, stderr=io.StringIO())
    lines = out.getvalue().splitlines()
    assert lines[0] == "created 1, updated 0, unchanged 0, refused 1"
    assert lines[1].startswith("refused user:ada:huge (too_long): content is 2001 characters")
    assert Note.objects.get(team=tenant.team).key == "home-city"
    assert Revision.objects.get(action=Revision.Action.CREATE).actor_ref == "import_memories:memories.json"

    again = io.StringIO()
    call_command("import_memories", str(path), "--team", tenant.team.slug, stdout=again, stderr=io.StringIO())
    assert again.getvalue().splitlines()[0] == "created 0, updated 0, unchanged 1, refused 1"


def test_import_memories_command_reads_jsonl(tenant, tmp_path):
    path = tmp_path / "memories.jsonl"
    lines = [{"format": FORMAT, "version": 1}, {"bank_kind": "global", "person": "ada", **note("home-city")}]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    out = io.StringIO()
    call_command("import_memories", str(path), "--team", tenant.team.slug, stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith("created 1, updated 0, unchanged 0, refused 0")


def test_import_memories_command_fails_on_an_unreadable_or_invalid_file(tenant, tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_memories", str(tmp_path / "missing.json"), "--team", tenant.team.slug)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something-else", "version": 1, "banks": []}))
    with pytest.raises(CommandError, match="not a memory package"):
        call_command("import_memories", str(bad), "--team", tenant.team.slug, stderr=io.StringIO())
    with pytest.raises(CommandError, match="No team"):
        call_command("import_memories", str(bad), "--team", "no-such-team")
    assert not Note.objects.exists()


def test_export_memories_command_to_stdout_and_to_a_file(tenant, ada_memories, tmp_path):
    out = io.StringIO()
    call_command("export_memories", "--team", tenant.team.slug, "--person", "ada", stdout=out)
    exported = json.loads(out.getvalue())
    assert exported["format"] == FORMAT
    assert {n["key"] for bank in exported["banks"] for n in bank["notes"]} == {
        "home-city", "prefers-norwegian", "deadline", "team-standup",
    }  # fmt: skip

    target = tmp_path / "ada.json"
    call_command(
        "export_memories", "--team", tenant.team.slug, "--person", "ada", "--output", str(target), stderr=io.StringIO()
    )
    assert json.loads(target.read_text())["banks"] == exported["banks"]
    assert target.stat().st_mode & 0o077 == 0

    with pytest.raises(CommandError, match="No person"):
        call_command("export_memories", "--team", tenant.team.slug, "--person", "nobody")


def test_exported_file_imports_through_the_command(tenant, other_tenant, ada_memories, tmp_path):
    target = tmp_path / "ada.json"
    call_command(
        "export_memories", "--team", tenant.team.slug, "--person", "ada", "--output", str(target), stderr=io.StringIO()
    )
    out = io.StringIO()
    call_command("import_memories", str(target), "--team", other_tenant.team.slug, stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith("created 4, updated 0, unchanged 0, refused 0")
