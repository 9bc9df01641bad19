"""The note index: invisibility of mismatched vectors, deletes, the embedder being down,
ordering by meaning, hybrid recall and a model change."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from memory.indexing import NOTES, namespace_for
from memory.models import Note, NoteVector
from memory.recall import Hit, hybrid_rank, recall_bundle, recall_memories
from memory.services import delete_note, remember
from memory.vectors import Similarities, order_by_meaning, similarities
from tests.memory.embedding_server import Behaviour, embedding_settings
from tests.support.factories import note_fields

pytestmark = pytest.mark.django_db


def write(tenant, person, actor, **fields):
    return remember(team=tenant.team, person=person, actor=actor, **note_fields(**fields)).note


def test_every_write_is_indexed_after_commit(tenant, person, actor, index_inline):
    with index_inline():
        note = write(tenant, person, actor)
    vector = NoteVector.objects.get(note=note)
    assert (vector.namespace, vector.model, vector.dim) == (namespace_for(tenant.team.pk), "hashing-v1-256", 256)
    assert np.isclose(np.linalg.norm(np.array(vector.embedding, dtype=np.float32)), 1.0)
    assert not NOTES.stale().exists()


def test_a_vector_of_another_model_width_or_namespace_is_invisible(tenant, person, actor, index_inline, settings):
    with index_inline():
        note = write(tenant, person, actor, content="Ada lives in Oslo")
    assert similarities(team=tenant.team, notes=[note], query="Oslo").scores.keys() == {note.pk}
    vector = NoteVector.objects.get(note=note)

    NoteVector.objects.filter(pk=vector.pk).update(model="some-other-model")
    assert similarities(team=tenant.team, notes=[note], query="Oslo").scores == {}

    NoteVector.objects.filter(pk=vector.pk).update(model="hashing-v1-256", namespace="team:999999")
    assert similarities(team=tenant.team, notes=[note], query="Oslo").scores == {}

    NoteVector.objects.filter(pk=vector.pk).update(namespace=namespace_for(tenant.team.pk))
    settings.EMBEDDING_DIM = 128  # hashing-v1-128: another model and another width
    assert similarities(team=tenant.team, notes=[note], query="Oslo").scores == {}
    settings.EMBEDDING_DIM = 0
    assert similarities(team=tenant.team, notes=[note], query="Oslo").scores.keys() == {note.pk}


def test_a_deleted_note_is_never_returned_by_any_search(tenant, person, actor, index_inline):
    with index_inline():
        doomed = write(tenant, person, actor, key="doomed", content="The launch code is tangerine")
        write(tenant, person, actor, key="kept", content="Ada likes tangerine juice")
    delete_note(note=doomed, actor=actor)
    assert not NoteVector.objects.filter(note_id=doomed.pk).exists()
    kwargs = {"team": tenant.team, "person": person, "agent": tenant.agent}
    for mode in ("hybrid", "bm25", "vector"):
        notes = list(Note.objects.all())
        assert doomed.pk not in {
            h.note.pk for h in hybrid_rank(tenant.team, notes, "launch code tangerine", mode=mode).hits
        }
    assert [h.note.key for h in recall_memories(query="launch code tangerine", **kwargs).hits] == ["kept"]
    assert [i.note.key for i in recall_bundle(query="launch code tangerine", **kwargs).items] == ["kept"]


def test_a_note_written_while_the_embedder_is_down_is_indexed_when_it_returns(
    tenant, person, actor, index_inline, settings
):
    behaviour = Behaviour(mode="500", dim=16)
    with embedding_settings(settings, behaviour):
        with index_inline():
            result = remember(team=tenant.team, person=person, actor=actor, **note_fields(content="Ada lives in Oslo"))
        assert result.action == "created"  # the write succeeded with the embedder down
        assert list(NOTES.stale()) == [result.note]

        ranked = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Oslo")
        assert [h.note.pk for h in ranked.hits] == [result.note.pk]  # BM25 still answers
        assert ranked.degraded == ["vectors"]  # and says what it could not use

        report = NOTES.reconcile()
        assert (report.indexed, report.error != "") == (0, True)

        behaviour.mode = "ok"
        assert NOTES.reconcile().indexed == 1
        assert not NOTES.stale().exists()
        assert NoteVector.objects.get().model == "fake-embed"
        assert recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="Oslo").degraded == []


def test_unscored_notes_sort_after_scored_ones_newest_first(tenant, person, actor, index_inline):
    with index_inline():
        relevant = write(tenant, person, actor, key="pets", content="Ada has a cat named Miso")
        other = write(tenant, person, actor, key="city", content="Ada lives in Oslo")
    unindexed_old = write(tenant, person, actor, key="old-unindexed", content="An old note")
    write(tenant, person, actor, key="new-unindexed", content="A newer note")
    Note.objects.filter(pk=unindexed_old.pk).update(updated_at=timezone.now() - timedelta(days=2))
    notes = list(Note.objects.all())
    order = order_by_meaning(team=tenant.team, notes=notes, query="tell me about the cat")
    assert [n.key for n in order.notes[:2]] == ["pets", "city"]
    assert [n.key for n in order.notes[2:]] == ["new-unindexed", "old-unindexed"]
    assert set(order.scores) == {relevant.pk, other.pk}
    assert order.degraded == ""


def test_without_vectors_the_order_is_newest_first(tenant, person, actor, settings):
    for i in range(3):
        write(tenant, person, actor, key=f"n{i}")
    Note.objects.filter(key="n1").update(updated_at=timezone.now() + timedelta(minutes=5))
    settings.EMBEDDER = "none"
    order = order_by_meaning(team=tenant.team, notes=list(Note.objects.all()), query="anything")
    assert [n.key for n in order.notes] == ["n1", "n2", "n0"]


def test_a_weak_vector_match_does_not_outrank_a_strong_keyword_match(tenant, person, actor, mocker):
    keyword = write(tenant, person, actor, key="deadline", content="The Apollo deadline moved to September")
    vague = write(tenant, person, actor, key="vague", content="Something loosely related")
    strong = write(tenant, person, actor, key="strong", content="Unrelated words entirely")
    notes = [keyword, vague, strong]

    def fake(*, team, current, query):
        return Similarities(scores={keyword.pk: 0.10, vague.pk: 0.35, strong.pk: 0.80})

    mocker.patch("memory.vectors.similarities_by_hash", side_effect=fake)
    hits = hybrid_rank(tenant.team, notes, "apollo deadline").hits
    ranks = [h.note.key for h in hits]
    assert ranks.index("deadline") < ranks.index("vague")
    assert "strong" in ranks  # a strong semantic match is found without any shared word
    vector_only = [h.note.key for h in hybrid_rank(tenant.team, notes, "apollo deadline", mode="vector").hits]
    assert vector_only[0] == "strong"


def test_below_the_floor_a_vector_adds_nothing(tenant, person, actor, mocker):
    only = write(tenant, person, actor, key="only", content="Nothing in common")
    mocker.patch("memory.vectors.similarities_by_hash", return_value=Similarities(scores={only.pk: 0.1}))
    assert hybrid_rank(tenant.team, [only], "apollo deadline").hits == []


def test_scope_walls_hold_in_hybrid_recall(tenant, person, actor, index_inline):
    with index_inline():
        remember(
            team=tenant.team,
            person=person,
            actor=actor,
            scope="project:apollo",
            **note_fields(content="Launch on Mars"),
        )
        remember(
            team=tenant.team,
            person=person,
            actor=actor,
            scope="project:zeus",
            **note_fields(key="zeus", content="Launch on Mars"),
        )
    ranked = recall_memories(
        team=tenant.team, person=person, agent=tenant.agent, query="launch mars", scope="project:apollo"
    )
    assert [h.note.bank.address for h in ranked.hits] == ["user:ada:project:apollo"]
    assert all(isinstance(h, Hit) and h.similarity is not None for h in ranked.hits)


def test_a_model_change_hides_old_vectors_and_the_reconciler_reembeds_everything(
    tenant, person, actor, index_inline, settings
):
    with index_inline():
        for i in range(5):
            write(tenant, person, actor, key=f"note-{i}", content=f"Fact number {i}")
    assert not NOTES.stale().exists()
    settings.EMBEDDING_DIM = 64  # the hashing embedder becomes hashing-v1-64
    notes = list(Note.objects.all())
    assert similarities(team=tenant.team, notes=notes, query="fact").scores == {}
    assert NOTES.stale().count() == 5
    assert NOTES.reconcile(batch_size=2).indexed == 5
    assert set(NoteVector.objects.values_list("model", "dim")) == {("hashing-v1-64", 64)}
    assert len(similarities(team=tenant.team, notes=notes, query="fact").scores) == 5


def test_index_notes_is_safe_to_run_twice_and_skips_deleted_notes(tenant, person, actor):
    note = write(tenant, person, actor)
    assert NOTES.index([note.pk]) == 1
    assert NOTES.index([note.pk]) == 0
    assert NoteVector.objects.count() == 1
    note_id = note.pk
    delete_note(note=note, actor=actor)
    assert NOTES.index([note_id]) == 0
    assert not NoteVector.objects.exists()


def test_reindex_command_shows_progress_and_indexes(tenant, person, actor, capsys):
    from django.core.management import call_command

    for i in range(3):
        write(tenant, person, actor, key=f"note-{i}")
    call_command("reindex", "--batch-size", "2")
    out = capsys.readouterr()
    assert "3 note(s) to index with hashing-v1-256" in out.out
    assert "Indexed 3 note(s)." in out.out
    assert "3/3" in out.err  # the progress bar
    assert not NOTES.stale().exists()


def test_a_strong_vector_match_outranks_an_accidental_keyword_match(tenant, person, actor, mocker):
    accidental = write(tenant, person, actor, key="commute", content="Anything can happen on the commute")
    answer = write(tenant, person, actor, key="peanut-allergy", content="Severe reaction to peanuts")
    mocker.patch(
        "memory.vectors.similarities_by_hash",
        return_value=Similarities(scores={accidental.pk: 0.05, answer.pk: 0.55}),
    )
    hits = hybrid_rank(tenant.team, [accidental, answer], "is there anything I am unable to eat?").hits
    assert [h.note.key for h in hits] == ["peanut-allergy", "commute"]


def test_a_kept_query_vector_is_had_at_once_and_an_unseen_one_is_not(mocker):
    from uuid import uuid4

    from memory import vectors
    from memory.embedders import get_embedder

    text = f"where did the kitten nap on {uuid4().hex}?"  # never embedded by another test
    assert vectors.kept_query_vector(text) is None
    embedded, _ = vectors.embed_query(text)
    spy = mocker.spy(type(get_embedder()), "embed")
    kept = vectors.kept_query_vector(text)
    assert kept is not None
    assert np.array_equal(kept[0], embedded)
    assert kept[1] == ""
    assert spy.call_count == 0  # a lookup, never an embedding


def test_a_turn_embeds_its_query_once_and_a_failing_embedder_is_asked_once(settings, mocker):
    from memory import vectors
    from memory.embedders import get_embedder

    embedder = get_embedder()
    spy = mocker.spy(type(embedder), "embed")
    first, _ = vectors.embed_query("where does the kitten nap? (cache test)")
    again, _ = vectors.embed_query("where does the kitten nap? (cache test)")
    assert spy.call_count == 1
    assert np.array_equal(first, again)

    behaviour = Behaviour(mode="slow", delay=0.6, dim=8)
    with embedding_settings(settings, behaviour, model="m-cache"):
        settings.EMBEDDING_TIMEOUT = 0.2
        for _ in range(4):
            vector, degraded = vectors.embed_query("a turn's message")
            assert vector is None
            assert "timed out" in degraded
        assert len(behaviour.requests) == 1  # one timeout for the turn, not four
        behaviour.mode = "ok"
        settings.EMBEDDING_TIMEOUT = 30.0  # from here on it must answer: a deadline, not a race on a busy machine
        get_embedder().embed(["the embedder answers again"])
        vector, degraded = vectors.embed_query("a turn's message")
        assert vector is not None
        assert degraded == ""


def test_a_text_being_embedded_is_embedded_once_for_every_caller_and_a_cancel_is_the_caller_s_own(settings):
    from memory import vectors

    behaviour = Behaviour(mode="slow", delay=0.4, dim=8)
    with embedding_settings(settings, behaviour, model="m-in-flight"):
        settings.EMBEDDING_TIMEOUT = 30.0
        first = vectors.embed_query_soon("what did the kitten eat?")
        second = vectors.embed_query_soon("what did the kitten eat?")
        dropped = vectors.embed_query_soon("what did the kitten eat?")
        other = vectors.embed_query_soon("where did the kitten sleep?")
        assert dropped.cancel()  # before the embedding ends: only this caller's future
        (one, why), (two, _), (three, _) = first.result(30), second.result(30), other.result(30)
        assert why == ""
        assert one is two
        assert not np.array_equal(one, three)
        assert dropped.cancelled()
        assert sorted(request["input"] if isinstance(request["input"], str) else request["input"][0]
                      for request in behaviour.requests) == ["what did the kitten eat?", "where did the kitten sleep?"]  # fmt: skip
        # Once it has landed, the text's vector is kept: a later call embeds nothing.
        again, _ = vectors.embed_query_soon("what did the kitten eat?").result(30)
        assert np.array_equal(again, one)
        assert len(behaviour.requests) == 2


def test_a_text_queued_for_embedding_is_embedded_by_the_embedder_it_was_asked_of(settings, monkeypatch):
    """The in-flight embedding is found by its embedder's key: it must be that embedder's vector,
    even when another is configured by the time a thread gets to it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from memory import vectors

    one_thread = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(vectors, "_EMBEDDING", one_thread)
    gate = threading.Event()
    one_thread.submit(gate.wait, 30)  # the only thread is busy: the embedding below waits its turn
    behaviour = Behaviour(mode="ok", dim=8)
    with embedding_settings(settings, behaviour, model="m-queued"):
        settings.EMBEDDING_TIMEOUT = 30.0
        queued = vectors.embed_query_soon("what did the puppy eat?")
        settings.EMBEDDER = "hashing"  # another embedder before the thread is free
        gate.set()
        vector, why = queued.result(30)
    one_thread.shutdown()
    assert why == ""
    assert vector is not None
    # The server embedded it (the hashing embedder asks no one).
    assert [request["input"] for request in behaviour.requests] in (
        [["what did the puppy eat?"]],
        ["what did the puppy eat?"],
    )


def test_a_vector_written_as_text_reads_back_as_the_same_float4s():
    """vector_text writes each component in the 9 digits that give its float4 back: Postgres (pgvector)
    reads back every bit, the smallest, largest and negative zero included."""
    from django.db import connection

    from memory.indexing import vector_text

    rng = np.random.default_rng(11)
    edges = np.array([1e-45, -1e-45, 1.1754942e-38, 3.4028235e38, -3.4028235e38, -0.0, 0.1, 1 / 3], dtype=np.float32)
    vectors = [*rng.standard_normal((20, 384)).astype(np.float32), edges, np.float64([0.1, 0.2, 1 / 3])]
    for vector in vectors:
        text = vector_text(vector)
        expected = np.asarray(vector, dtype=np.float32)
        assert len(text) < len("[" + ",".join(map(repr, expected.tolist())) + "]")  # shorter than doubles
        parsed = np.array([np.float32(float(part)) for part in text[1:-1].split(",")], dtype=np.float32)
        assert parsed.tobytes() == expected.tobytes()
        with connection.cursor() as cursor:
            cursor.execute("SELECT vector_send(%s::vector)", [text])
            (sent,) = cursor.fetchone()
        assert np.frombuffer(bytes(sent), dtype=">f4", offset=4).astype(np.float32).tobytes() == expected.tobytes()
