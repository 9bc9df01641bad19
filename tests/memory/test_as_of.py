"""Memory as of a date: GET /api/v1/notes?as_of= and the as_of argument of recall_memories, search and
recall answer with the notes as they stood then, rebuilt from the revision log; erasure beats history."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from accounts.models import Person
from config.mcp import call_tool
from memory import services
from memory.models import Read
from memory.services.reads import flush_reads
from tests.support.canary import find_text
from tests.test_query_counts import people_with_memories

pytestmark = pytest.mark.django_db

CANARIES = ("quokkafirst", "quokkasecond", "quokkathird")
QUERY = "where does Ada live"


def call(tenant, name, **args):
    args.setdefault("person", "ada")
    return tenant.client.post(f"/api/v1/tools/{name}", args, format="json")


def write(tenant, content):
    response = call(
        tenant, "remember", key="home-city", description="Where Ada lives", content=content, category="places"
    )
    assert response.status_code == 200, response.json()
    return response.json()["id"]


def moment():
    """Now, as as_of text: between two writes, a moment no write shares."""
    return timezone.now().isoformat()


@pytest.fixture
def history(admin_tenant):
    """A note written, then changed twice; the as_of text of a moment before it, after each version."""
    before = moment()
    note_id = write(admin_tenant, f"Ada lives in Oslo ({CANARIES[0]}).")
    first = moment()
    write(admin_tenant, f"Ada lives in Bergen ({CANARIES[1]}).")
    second = moment()
    write(admin_tenant, f"Ada lives in Tromsø ({CANARIES[2]}).")
    third = moment()
    return note_id, {"before": before, "first": first, "second": second, "third": third}


def answers(tenant, at):
    """What the note list and each of the three tools answer as of `at`, as text to scan, by path."""
    listed = tenant.client.get("/api/v1/notes", {"person": "ada", "as_of": at})
    assert listed.status_code == 200, listed.json()
    found = {"list": listed.json()}
    for tool in ("recall_memories", "search", "recall"):
        response = call(tenant, tool, query=QUERY, as_of=at)
        assert response.status_code == 200, response.json()
        found[tool] = response.json()
    return found


def test_a_note_changed_twice_answers_each_moment_with_what_it_said_then(admin_tenant, history):
    note_id, at = history
    for when, canary in [("first", CANARIES[0]), ("second", CANARIES[1]), ("third", CANARIES[2])]:
        found = answers(admin_tenant, at[when])
        [listed] = found["list"]["results"]
        assert listed["id"] == note_id
        assert listed["key"] == "home-city"
        assert listed["bank"] == "user:ada"
        assert listed["category"] == "places"
        assert canary in listed["content"]
        assert listed["as_of"] == at[when].replace("+00:00", "Z")
        assert "source" not in listed
        assert "repetitions" not in listed
        [hit] = found["recall_memories"]["results"]
        assert (hit["id"], hit["bank"], hit["key"]) == (note_id, "user:ada", "home-city")
        assert canary in hit["content"]
        [snippet] = found["search"]["results"]
        assert snippet["id"] == note_id
        assert canary in snippet["snippet"]
        [item] = found["recall"]["items"]
        assert item["id"] == note_id
        assert canary in item["content"]
        others = [c for c in CANARIES if c != canary]
        assert not any(other in str(found) for other in others), when


def test_before_the_note_existed_no_answer_holds_it(admin_tenant, history):
    _, at = history
    found = answers(admin_tenant, at["before"])
    assert found["list"]["results"] == []
    assert found["recall_memories"]["results"] == []
    assert found["search"]["results"] == []
    assert found["recall"]["items"] == []


def test_the_present_answers_are_unchanged_without_as_of(admin_tenant, history):
    note_id, _ = history
    listed = admin_tenant.client.get("/api/v1/notes", {"person": "ada"}).json()["results"]
    assert [note["id"] for note in listed] == [note_id]
    assert listed[0]["source"] == "remember"
    assert "as_of" not in listed[0]
    [hit] = call(admin_tenant, "recall_memories", query=QUERY).json()["results"]
    assert CANARIES[2] in hit["content"]


def test_a_deleted_note_is_there_before_its_deletion_and_gone_after(admin_tenant, history):
    note_id, at = history
    assert call(admin_tenant, "forget_memory", key="home-city").status_code == 200
    after = moment()
    assert CANARIES[2] in str(answers(admin_tenant, at["third"]))
    [listed] = admin_tenant.client.get("/api/v1/notes", {"person": "ada", "as_of": at["second"]}).json()["results"]
    assert listed["id"] == note_id
    assert CANARIES[1] in listed["content"]
    gone = answers(admin_tenant, after)
    assert not any(canary in str(gone) for canary in CANARIES)


def test_after_erasure_no_as_of_answer_returns_the_note(admin_tenant, history):
    note_id, at = history
    erased = admin_tenant.client.delete(f"/api/v1/notes/{note_id}?erase=true")
    assert erased.status_code == 200, erased.json()
    for when, at_text in at.items():
        found = answers(admin_tenant, at_text)
        assert not any(canary in str(found) for canary in CANARIES), when
        assert found["list"]["results"] == []
        assert found["recall_memories"]["results"] == []
        assert found["search"]["results"] == []
        assert found["recall"]["items"] == []
    for canary in CANARIES:
        assert find_text(canary) == []


def test_as_of_reads_are_in_the_read_audit(admin_tenant, history):
    note_id, at = history
    flush_reads()
    Read.objects.all().delete()
    for tool in ("recall_memories", "search", "recall"):
        assert call(admin_tenant, tool, query=QUERY, as_of=at["first"]).status_code == 200
    flush_reads()
    reads = {read.tool: read for read in Read.objects.filter(team=admin_tenant.team)}
    assert set(reads) == {"recall_memories", "search", "recall"}
    person = Person.objects.get(team=admin_tenant.team, external_id="ada")
    for read in reads.values():
        assert read.notes == [note_id]
        assert read.query == QUERY
        assert read.agent_id == admin_tenant.agent.pk
        assert read.person_id == person.pk
        assert read.as_of == datetime.fromisoformat(
            at["first"]
        )  # the audit says the read asked about the past, and when
    # The reads API says it too; a present-time read says null.
    assert call(admin_tenant, "search", query=QUERY).status_code == 200
    flush_reads()
    listed = admin_tenant.client.get("/api/v1/reads", {"person": "ada"}).json()["results"]
    assert (listed[0]["tool"], listed[0]["as_of"]) == ("search", None)
    assert {datetime.fromisoformat(r["as_of"]) for r in listed[1:]} == {datetime.fromisoformat(at["first"])}


def test_a_muted_category_stays_withheld_in_as_of_answers(admin_tenant, history):
    _, at = history
    person = Person.objects.get(team=admin_tenant.team, external_id="ada")
    services.mute_category(person=person, agent=admin_tenant.agent, category="places")
    found = str(answers(admin_tenant, at["second"]))
    assert not any(canary in found for canary in CANARIES)


def test_a_moment_the_note_was_muted_under_another_category_is_withheld_too(admin_tenant):
    write(admin_tenant, f"Ada lives in Oslo ({CANARIES[0]}).")
    at = moment()
    person = Person.objects.get(team=admin_tenant.team, external_id="ada")
    call(admin_tenant, "remember", key="home-city", description="Where Ada lives", content="Ada moved.",
         category="health")  # fmt: skip
    services.mute_category(person=person, agent=admin_tenant.agent, category="health")
    assert CANARIES[0] not in str(answers(admin_tenant, at))


def test_another_teams_notes_never_appear(admin_tenant, other_tenant, history):
    _, at = history
    call(
        other_tenant,
        "remember",
        key="home-city",
        description="Where Ada lives",
        content="Ada lives in Nuuk (walrusother).",
    )
    later = moment()
    for when in [*at.values(), later]:
        assert "walrusother" not in str(answers(admin_tenant, when))
    theirs = answers(other_tenant, later)
    assert "walrusother" in str(theirs)
    assert not any(canary in str(theirs) for canary in CANARIES)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("yesterday", "must be ISO 8601 with a timezone"),
        ("2026-13-01", "must be ISO 8601 with a timezone"),
        ("2026-11-30T25:00:00Z", "must be ISO 8601 with a timezone"),
        ("2999-01-01", "is in the future"),
        ("in-an-hour", "is in the future"),  # a moment an hour from now (test ids must not change)
    ],
)
def test_a_bad_or_future_as_of_is_400_saying_the_format(tenant, value, says):
    if value == "in-an-hour":
        value = (timezone.now() + timedelta(hours=1)).isoformat()
    listed = tenant.client.get("/api/v1/notes", {"person": "ada", "as_of": value})
    assert listed.status_code == 400
    error = listed.json()["error"]
    assert error["code"] == "invalid"
    assert error["field"] == "as_of"
    assert says in error["message"]
    assert "or a date (e.g. 2026-11-30)" in error["message"]
    for tool in ("recall_memories", "search", "recall"):
        response = call(tenant, tool, query=QUERY, as_of=value)
        assert response.status_code == 400, tool
        error = response.json()["error"]
        assert error["field"] == "as_of"
        assert error["message"].startswith(f"as_of: {says.removeprefix('is ').removeprefix('must ')}") or (
            says in error["message"]
        )
        assert "ISO 8601" in error["message"]


def test_a_date_means_the_end_of_that_day_and_a_naive_time_is_utc(admin_tenant, history):
    _, at = history
    today = timezone.now().date().isoformat()
    [listed] = admin_tenant.client.get("/api/v1/notes", {"person": "ada", "as_of": today}).json()["results"]
    assert CANARIES[2] in listed["content"]
    naive = at["first"].replace("+00:00", "")
    [listed] = admin_tenant.client.get("/api/v1/notes", {"person": "ada", "as_of": naive}).json()["results"]
    assert CANARIES[0] in listed["content"]
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    assert admin_tenant.client.get("/api/v1/notes", {"person": "ada", "as_of": yesterday}).json()["results"] == []


def test_the_mcp_path_takes_as_of_as_rest_does(admin_tenant, history):
    _, at = history
    for tool in ("recall_memories", "search", "recall"):
        body, is_error = call_tool(
            api_key=admin_tenant.key.api_key,
            name=tool,
            arguments={"person": "ada", "query": QUERY, "as_of": at["first"]},
        )
        assert not is_error, body
        assert CANARIES[0] in str(body)
        assert not any(other in str(body) for other in CANARIES[1:])
    body, is_error = call_tool(
        api_key=admin_tenant.key.api_key, name="search", arguments={"person": "ada", "query": QUERY, "as_of": "soon"}
    )
    assert is_error
    assert body["error"]["field"] == "as_of"
    assert "ISO 8601" in body["error"]["message"]


@pytest.mark.parametrize("rows", [3, 30])
@pytest.mark.parametrize(
    ("who", "queries", "expected"),
    [
        # the banks, the latest revision of each note by then (with its first), the agent's mutes of
        # those people, and which of the notes exist now and which of those are muted now
        pytest.param(None, 5, lambda rows: 3 * rows, id="team"),
        pytest.param("person-1", 1 + 5, lambda rows: 2, id="a-person"),  # the person named first
    ],
)
def test_the_as_of_list_makes_as_many_queries_for_30_rows_as_for_3(
    tenant, actor, rows, who, queries, expected, django_assert_num_queries
):
    people_with_memories(tenant, actor, rows)
    assert tenant.client.get("/api/v1/me").status_code == 200  # the key's last_used_at is fresh from here on
    params = {"as_of": moment(), "limit": 200} | ({"person": who} if who else {})
    with django_assert_num_queries(queries):
        page = tenant.client.get("/api/v1/notes", params)
    assert page.status_code == 200, page.json()
    assert page.json()["count"] == len(page.json()["results"]) == expected(rows)


def test_after_the_persons_erasure_no_as_of_answer_returns_their_notes(admin_tenant, history):
    _, at = history
    assert admin_tenant.client.delete("/api/v1/people/ada").status_code == 200
    for when, at_text in at.items():
        listed = admin_tenant.client.get("/api/v1/notes", {"as_of": at_text})
        assert listed.json()["results"] == [], when
        for tool in ("recall_memories", "search", "recall"):
            assert not any(
                canary in str(call(admin_tenant, tool, query=QUERY, as_of=at_text).json()) for canary in CANARIES
            )
    for canary in CANARIES:
        assert find_text(canary) == []
