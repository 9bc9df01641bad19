"""History import: JSON lines of conversations with their messages, over the API and the command."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Conversation, Message

pytestmark = pytest.mark.django_db


def conversation(external_id="c1", person="ada", messages=None, **extra):
    return {
        "person": person,
        "external_id": external_id,
        "messages": messages
        or [
            {"role": "user", "content": "I adopted a greyhound called Biscuit", "created_at": "2023-05-08T13:56:00+00:00", "external_id": "m1"},
            {"role": "assistant", "content": "Congratulations on Biscuit!", "created_at": "2023-05-08T13:57:10+00:00", "external_id": "m2"},
        ],
        **extra,
    }  # fmt: skip


def counts(body):
    return {
        key: body[key]
        for key in ("conversations_created", "conversations_matched", "messages_created", "messages_present")
    }


def post_import(tenant, items):
    return tenant.client.post("/api/v1/conversations/import", items, format="json")


def test_api_import_keeps_dates_and_order_and_reimport_adds_nothing(tenant):
    first = post_import(tenant, [conversation(), conversation("c2", person="bo")])
    assert first.status_code == 201, first.json()
    assert counts(first.json()) == {
        "conversations_created": 2, "conversations_matched": 0, "messages_created": 4, "messages_present": 0,
    }  # fmt: skip
    imported = Conversation.objects.get(team=tenant.team, external_id="c1")
    assert imported.agent == tenant.agent
    assert imported.started_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert imported.ended_at.isoformat() == "2023-05-08T13:57:10+00:00"
    messages = list(Message.objects.filter(conversation=imported).order_by("order"))
    assert [(m.order, m.role, m.external_id) for m in messages] == [(1, "user", "m1"), (2, "assistant", "m2")]
    assert messages[0].created_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert imported.exchanges_since_curation == 1  # counted as record_message counts

    # Again, with one new message: only that one is added, after the others.
    extra = {
        "role": "user",
        "content": "Biscuit learned to sit",
        "created_at": "2023-06-01T09:00:00Z",
        "external_id": "m3",
    }
    again = post_import(tenant, [conversation(messages=[*conversation()["messages"], extra]), conversation("c2", "bo")])
    assert counts(again.json()) == {
        "conversations_created": 0, "conversations_matched": 2, "messages_created": 1, "messages_present": 4,
    }  # fmt: skip
    assert Conversation.objects.filter(team=tenant.team).count() == 2
    assert Message.objects.filter(team=tenant.team).count() == 5
    added = Message.objects.get(conversation=imported, external_id="m3")
    assert added.order == 3
    imported.refresh_from_db()
    assert imported.ended_at.isoformat() == "2023-06-01T09:00:00+00:00"


def test_imported_dates_show_in_search_results_and_recent_messages(tenant):
    post_import(tenant, [conversation()])
    search = tenant.client.post(
        "/api/v1/tools/search_conversation", {"person": "ada", "query": "greyhound"}, format="json"
    ).json()
    assert [hit["created_at"] for hit in search["results"]] == ["2023-05-08T13:56:00+00:00"]
    recent = tenant.client.post("/api/v1/tools/recent_messages", {"person": "ada"}, format="json").json()
    assert [m["created_at"][:10] for m in recent["messages"]] == ["2023-05-08", "2023-05-08"]


def test_import_is_per_agent_and_team(tenant, other_tenant):
    post_import(tenant, [conversation()])
    assert post_import(other_tenant, [conversation()]).json()["conversations_created"] == 1
    assert Message.objects.filter(team=other_tenant.team).count() == 2
    assert Message.objects.filter(team=tenant.team).count() == 2


@pytest.mark.parametrize(
    ("bad", "field", "words"),
    [
        ({"content": "no role", "created_at": "2023-05-08T13:56:00Z", "external_id": "x"}, "messages[0].role", "role must be"),
        ({"role": "user", "content": "naive", "created_at": "2023-05-08T13:56:00", "external_id": "x"}, "messages[0].created_at", "timezone"),
        ({"role": "user", "content": "no id", "created_at": "2023-05-08T13:56:00Z"}, "messages[0].external_id", "external_id"),
        ({"role": "user", "content": "early", "created_at": "0001-01-01T00:00:00+01:00", "external_id": "x"}, "messages[0].created_at", "out of range"),
        ({"role": "user", "content": "   ", "created_at": "2023-05-08T13:56:00Z", "external_id": "x"}, "messages[0].content", "needs some text"),
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_with_its_number_and_nothing_is_written(tenant, bad, field, words):
    items = [conversation("c1"), conversation("c2"), conversation("c3", messages=[bad])]
    response = post_import(tenant, items)
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["field"] == f"[2].{field}"  # item 2 of the array is line 3
    assert error["message"].startswith("line 3: ")
    assert words in error["message"]
    assert "Nothing was imported" in error["message"]
    assert not Conversation.objects.filter(team=tenant.team).exists()
    assert not Message.objects.filter(team=tenant.team).exists()


def test_too_long_message_and_duplicate_lines_are_refused(tenant, settings):
    long = {
        "role": "user",
        "content": "x" * (settings.MESSAGE_MAX_CHARS + 1),
        "created_at": "2023-05-08T13:56:00Z",
        "external_id": "x",
    }
    response = post_import(tenant, [conversation("c1"), conversation("c2", messages=[long])])
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "too_long"
    assert response.json()["error"]["message"].startswith("line 2: ")
    twice = post_import(tenant, [conversation("c1"), conversation("c1")])
    assert twice.status_code == 400
    assert "also line 1" in twice.json()["error"]["message"]
    assert post_import(tenant, {"person": "ada"}).status_code == 400
    assert not Message.objects.filter(team=tenant.team).exists()


def test_a_nul_in_content_is_refused_over_the_api_and_in_the_command(tenant, tmp_path):
    nul = {"role": "user", "content": "a\x00b", "created_at": "2023-05-08T13:56:00Z", "external_id": "x"}
    items = [conversation("c1"), conversation("c2"), conversation("c3", messages=[nul])]
    # The API's JSON parser refuses it first, naming the item (the third line) and the field.
    response = post_import(tenant, items)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "[2].messages[0].content"
    path = write_jsonl(tmp_path, items)
    with pytest.raises(CommandError, match=r"line 3: messages\[0\]\.content .*NUL"):
        call_command("import_conversations", path, team=tenant.team.slug, agent=tenant.agent.slug, stderr=StringIO())
    assert not Message.objects.filter(team=tenant.team).exists()


def write_jsonl(tmp_path, lines):
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_command_imports_with_progress_and_count_and_is_idempotent(tenant, tmp_path):
    path = write_jsonl(tmp_path, [conversation(), "", conversation("c2", person="bo")])
    out, err = StringIO(), StringIO()
    call_command("import_conversations", path, team=tenant.team.slug, agent=tenant.agent.slug, stdout=out, stderr=err)
    assert "4 messages imported (0 already present) in 2 new and 0 existing conversations" in out.getvalue()
    assert Message.objects.filter(team=tenant.team).count() == 4
    out = StringIO()
    call_command("import_conversations", path, team=tenant.team.slug, agent=tenant.agent.slug, stdout=out, stderr=err)
    assert "0 messages imported (4 already present) in 0 new and 2 existing conversations" in out.getvalue()
    assert Message.objects.filter(team=tenant.team).count() == 4


def test_command_refuses_a_bad_line_with_its_number_and_writes_nothing(tenant, tmp_path):
    bad = conversation("c3")
    del bad["messages"][1]["role"]
    path = write_jsonl(tmp_path, [conversation("c1"), conversation("c2"), bad])
    with pytest.raises(CommandError, match=r"line 3: messages\[1\]\.role must be one of user, assistant"):
        call_command("import_conversations", path, team=tenant.team.slug, agent=tenant.agent.slug, stderr=StringIO())
    broken = write_jsonl(tmp_path, [conversation("c1"), "{not json"])
    with pytest.raises(CommandError, match=r"line 2: not JSON"):
        call_command("import_conversations", broken, team=tenant.team.slug, agent=tenant.agent.slug, stderr=StringIO())
    with pytest.raises(CommandError, match="No agent"):
        call_command("import_conversations", path, team=tenant.team.slug, agent="nobody")
    assert not Message.objects.filter(team=tenant.team).exists()


def test_embedding_is_queued_after_commit_in_batches(tenant, index_inline):
    import memory.indexing
    from conversations.indexing import MESSAGES
    from conversations.models import MessageVector

    messages = [
        {"role": "user", "content": f"note number {i} about trains", "created_at": "2023-05-08T13:56:00Z", "external_id": f"m{i}"}
        for i in range(300)
    ]  # fmt: skip
    with index_inline():
        assert post_import(tenant, [conversation(messages=messages)]).status_code == 201
        assert not MessageVector.objects.exists()  # nothing is embedded inside the import's transaction

    batches = [call.args[1] for call in memory.indexing.dispatch.call_args_list]
    assert [len(batch) for batch in batches] == [256, 44]
    assert MessageVector.objects.filter(team=tenant.team).count() == 300
    assert not MESSAGES.stale().exists()


def test_passages_of_imported_history_show_its_date(tenant):
    post_import(tenant, [conversation()])
    body = tenant.client.post(
        "/api/v1/turns", {"person": "ada", "message": "What was my greyhound called?"}, format="json"
    ).json()
    assert body["conversation"] != Conversation.objects.get(external_id="c1").pk  # history is closed, not continued
    passages = next(block for block in body["blocks"] if block["layer"] == "passages")
    lines = [json.loads(line) for line in passages["text"].splitlines() if line.startswith("{")]
    biscuit = Message.objects.get(content="I adopted a greyhound called Biscuit")
    assert {"when": "2023-05-08", "who": "person", "message": biscuit.pk, "text": biscuit.content} in lines


def test_the_import_job_shows_counts_and_embedding_progress(tenant, index_inline):
    from conversations.indexing import MESSAGES

    first = post_import(tenant, [conversation(), conversation("c2", person="bo")])
    job = first.json()
    assert first["Location"] == job["url"] == f"/api/v1/conversations/imports/{job['id']}"
    assert job["status"] == "embedding"  # recorded at once, embedded afterwards by the worker
    assert (job["lines"], job["messages_created"], job["messages_embedded"], job["messages_waiting"]) == (2, 4, 0, 4)

    # The worker embeds them: the job says so.
    with index_inline():
        MESSAGES.schedule_many(list(Message.objects.filter(team=tenant.team).values_list("pk", flat=True)))
    done = tenant.client.get(job["url"]).json()
    assert (done["status"], done["messages_embedded"], done["messages_waiting"]) == ("done", 4, 0)
    assert done["embedder"]

    # Importing again: a job of its own, the duplicates counted as skipped, nothing left to embed.
    again = post_import(tenant, [conversation()]).json()
    assert again["id"] != job["id"]
    assert (again["messages_created"], again["messages_present"], again["status"]) == (0, 2, "done")

    # A message deleted since the import no longer counts as waiting.
    Message.objects.filter(team=tenant.team, external_id="m2", conversation__person__external_id="bo").delete()
    after = tenant.client.get(job["url"]).json()
    assert (after["messages_embedded"], after["messages_deleted"]) == (3, 1)


def test_an_import_job_without_an_embedder_says_so(tenant, settings):
    settings.EMBEDDER = "none"
    job = post_import(tenant, [conversation()]).json()
    assert (job["status"], job["messages_waiting"], job["embedder"]) == ("not_embedding", 0, "")


def test_an_import_job_is_the_calling_agents_only(tenant, other_tenant):
    job = post_import(tenant, [conversation()]).json()
    assert tenant.client.get(job["url"]).status_code == 200
    hidden = other_tenant.client.get(job["url"])
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "not_found"
    assert tenant.client.get("/api/v1/conversations/imports/999999").status_code == 404


def test_a_refused_import_leaves_no_job(tenant):
    from conversations.models import ConversationImport

    bad = post_import(tenant, [conversation(), {"person": "ada", "external_id": "c9", "messages": []}])
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith("line 2:")
    assert not ConversationImport.objects.exists()


def test_id_runs_are_exact():
    from conversations.history_import import id_runs

    assert id_runs([7, 1, 2, 3, 9, 10]) == [[1, 3], [7, 7], [9, 10]]
    assert id_runs([]) == []
