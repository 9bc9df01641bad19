"""Notes, banks and revisions endpoints, and the tenant wall on every memory endpoint."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from memory.models import Bank, Note, Revision

pytestmark = pytest.mark.django_db


def seed(tenant, person="ada"):
    client = tenant.client
    for key in ["city", "pet"]:
        client.post(
            "/api/v1/tools/remember",
            {"person": person, "scope": "project:apollo", "key": key, "description": key, "content": f"{key} fact",
             "category": "basics"},
            format="json",
        )  # fmt: skip
    client.post(
        "/api/v1/tools/remember",
        {"person": person, "key": "name", "description": "name", "content": "Ada", "kind": "identity"},
        format="json",
    )
    return Note.objects.filter(team=tenant.team).order_by("id")


def test_notes_list_filters_and_paginates(tenant, django_assert_max_num_queries):
    seed(tenant)
    seed(tenant, person="bob")
    with django_assert_max_num_queries(6):
        response = tenant.client.get("/api/v1/notes", {"person": "ada"})
    body = response.json()
    assert body["count"] == 3
    assert {n["key"] for n in body["results"]} == {"city", "pet", "name"}
    assert set(body["results"][0]) >= {"id", "bank", "key", "description", "content", "kind", "scope_refs", "source"}
    by_bank = tenant.client.get("/api/v1/notes", {"bank": "user:ada:project:apollo"}).json()
    assert {n["key"] for n in by_bank["results"]} == {"city", "pet"}
    page = tenant.client.get("/api/v1/notes", {"limit": 2}).json()
    assert len(page["results"]) == 2
    assert page["next"]


def test_note_detail_and_delete(tenant):
    note = seed(tenant).first()
    assert tenant.client.get(f"/api/v1/notes/{note.pk}").json()["key"] == note.key
    deleted = tenant.client.delete(f"/api/v1/notes/{note.pk}")
    assert deleted.status_code == 200
    assert deleted.json()["action"] == "deleted"
    assert not Note.objects.filter(pk=note.pk).exists()
    assert Revision.objects.filter(note_id=note.pk, action="delete").exists()
    assert tenant.client.get(f"/api/v1/notes/{note.pk}").status_code == 404


def test_banks_list_and_detail_show_counts_limits_and_state(tenant):
    seed(tenant)
    banks = tenant.client.get("/api/v1/banks", {"person": "ada"}).json()["results"]
    assert {b["id"]: b["count"] for b in banks} == {"user:ada": 1, "user:ada:project:apollo": 2}
    detail = tenant.client.get("/api/v1/banks/" + quote("user:ada:project:apollo", safe="")).json()
    assert detail["policy"] == "curated"
    assert (detail["count"], detail["soft_limit"], detail["hard_limit"], detail["full"]) == (2, 40, 64, False)
    assert detail["consolidation"]["pending"] is False


def test_bank_patch_needs_an_admin_key(tenant, admin_tenant):
    seed(tenant)
    url = "/api/v1/banks/" + quote("user:ada", safe="")
    refused = tenant.client.patch(url, {"policy": "bounded"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert Bank.objects.get(address="user:ada").policy == "curated"


def test_bank_patch_with_an_admin_key_changes_policy_and_logs_it(admin_tenant):
    seed(admin_tenant)
    url = "/api/v1/banks/" + quote("user:ada", safe="")
    response = admin_tenant.client.patch(url, {"policy": "bounded", "capacity": 8}, format="json")
    assert response.status_code == 200
    assert (response.json()["policy"], response.json()["capacity"]) == ("bounded", 8)
    assert Revision.objects.filter(bank__address="user:ada", action="latch", actor="admin").exists()
    bad = admin_tenant.client.patch(url, {"soft_limit": 50, "hard_limit": 10}, format="json")
    assert bad.status_code == 400
    assert bad.json()["error"]["field"] == "hard_limit"


def test_revisions_list_filters_by_note_person_and_bank(tenant):
    note = seed(tenant).first()
    by_note = tenant.client.get("/api/v1/revisions", {"note": note.pk}).json()
    assert [r["action"] for r in by_note["results"]] == ["create"]
    by_person = tenant.client.get("/api/v1/revisions", {"person": "ada"}).json()
    assert by_person["count"] == 3
    assert tenant.client.get("/api/v1/revisions", {"note": "x"}).status_code == 400


def test_another_team_gets_404_for_every_note_bank_and_revision(tenant, other_tenant):
    notes = list(seed(tenant))
    other = other_tenant.client
    for note in notes:
        for method in ("get", "delete"):
            response = getattr(other, method)(f"/api/v1/notes/{note.pk}")
            assert response.status_code == 404, (method, note.pk)
            assert response.json()["error"]["code"] == "not_found"
        edit = other.post(
            "/api/v1/tools/edit_note",
            {"person": "ada", "id": note.pk, "mode": "replace", "content": "x"},
            format="json",
        )
        assert edit.status_code == 404
    for bank in Bank.objects.filter(team=tenant.team):
        url = "/api/v1/banks/" + quote(bank.address, safe="")
        assert other.get(url).status_code == 404
        assert other.patch(url, {"capacity": 3}, format="json").status_code == 404
    for revision in Revision.objects.filter(team=tenant.team):
        listed = other.get("/api/v1/revisions", {"note": revision.note_id}).json()
        assert listed["count"] == 0
    # The tool calls above made "ada" known to the other team too (people are created on first
    # sight); that person is theirs, and owns nothing of the first team's.
    for endpoint in ("notes", "banks", "revisions"):
        assert other.get(f"/api/v1/{endpoint}", {"person": "ada"}).json()["count"] == 0, endpoint
    assert other.get("/api/v1/notes", {"person": "nobody-here"}).status_code == 404
    assert other.get("/api/v1/notes").json()["count"] == 0
    assert other.get("/api/v1/banks").json()["count"] == 0
    assert other.get("/api/v1/revisions").json()["count"] == 0
    # The same person id in another team is another person: tools never reach across.
    recalled = other.post("/api/v1/tools/recall_memories", {"person": "ada", "query": "city fact"}, format="json")
    assert recalled.json()["results"] == []
    forgotten = other.post("/api/v1/tools/forget_memory", {"person": "ada", "key": "name"}, format="json")
    assert forgotten.status_code == 404
    assert Note.objects.filter(team=tenant.team).count() == len(notes)
