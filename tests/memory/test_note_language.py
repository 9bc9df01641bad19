"""Note recall in the note's own language: Russian, German and Spanish notes found by other word
forms than they use, English read as it always was, and unclear text read as 'simple' words."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from memory.kept_banks import Terms, forget_kept
from memory.language import CONFIGS, ENGLISH, NEUTRAL, note_config
from memory.models import Note
from memory.recall import bm25, recall_memories
from memory.services import edit_note, remember
from memory.text import STOP_WORDS, stem, stop_words, tokens, words
from tests.support.factories import note_fields, written
from tests.support.postgres_share import POSTGRES_SHARE

SHIPPED = POSTGRES_SHARE / "tsearch_data"
COPIES = Path(__file__).resolve().parents[2] / "memory/assets/stopwords"


def found(tenant, person, query, mode="bm25"):
    ranked = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query=query, mode=mode)
    return [hit.note.key for hit in ranked.hits]


def test_each_stop_word_list_is_the_one_postgres_ships():
    copies = sorted(path.name for path in COPIES.glob("*.stop"))
    assert copies == sorted(path.name for path in SHIPPED.glob("*.stop") if path.name != "english.stop")
    for name in copies:
        assert (COPIES / name).read_text() == (SHIPPED / name).read_text(), name
        assert name.removesuffix(".stop") in CONFIGS.values()
    assert "и" in stop_words("russian")
    assert "und" in stop_words("german")
    assert stop_words(ENGLISH) == STOP_WORDS
    assert stop_words(NEUTRAL) == frozenset()


@pytest.mark.django_db
def test_words_are_read_as_postgres_reads_them_in_that_language():
    # Russian and Hindi read a word of ASCII letters as English, as Postgres' configurations do.
    samples = {"russian": "Собаку зовут Булка, она любит databases", "german": "Die Wohnungen meiner Schwestern"}
    for config, text in samples.items():
        with connection.cursor() as cursor:
            cursor.execute("SELECT array(SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)))", [config, text])
            (postgres,) = cursor.fetchone()
        assert set(tokens(text, config)) == set(postgres), config


@pytest.mark.django_db
def test_a_russian_note_is_found_by_an_inflected_russian_query(tenant, person, actor):
    note = written(
        remember(
            team=tenant.team, person=person, actor=actor,
            **note_fields(key="dog", description="Собака из приюта", content="Вчера Анна забрала из приюта собаку Булку."),
        )
    )  # fmt: skip
    remember(team=tenant.team, person=person, actor=actor, **note_fields())
    assert note.language == "russian"
    assert Note.objects.get(pk=note.pk).language == "russian"
    assert found(tenant, person, "Что известно о собаке?") == ["dog"]  # noqa: RUF001 (собаке, собаку: one stem)
    assert found(tenant, person, "приюты") == ["dog"]
    assert found(tenant, person, "where does Ada live") == ["home-city"]  # English beside it, as before
    hybrid = recall_memories(team=tenant.team, person=person, agent=tenant.agent, query="собаке", mode="hybrid")
    assert [hit.note.key for hit in hybrid.hits][:1] == ["dog"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("config", "description", "content", "query"),
    [
        (
            "german",
            "Wohnung in Hamburg",
            "Anna wohnt mit ihren zwei Schwestern in einer kleinen Wohnung in Hamburg.",
            "Wo liegen die Wohnungen ihrer Schwester?",
        ),
        (
            "spanish",
            "Trabajo de su hermana",
            "Su hermana trabaja como enfermera en un hospital de Sevilla.",
            "¿Dónde trabajaba la hermana?",
        ),
    ],
)
def test_a_german_or_spanish_note_is_found_by_other_word_forms(
    tenant, person, actor, config, description, content, query
):
    note = written(
        remember(
            team=tenant.team, person=person, actor=actor,
            **note_fields(key="fact", description=description, content=content),
        )
    )  # fmt: skip
    assert note.language == config
    assert found(tenant, person, query) == ["fact"]
    # Read as English, fewer of the query's words meet the note's (Wohnungen, Wohnung; trabajaba, trabaja).
    as_english = bm25([Terms.of(note.key, description, content)], query).matched[0]
    in_its_language = bm25([Terms.of(note.key, description, content, language=config)], query).matched[0]
    assert len(as_english) < len(in_its_language)


@pytest.mark.django_db
def test_an_english_note_is_read_as_it_always_was(tenant, person, actor):
    text = "Rosa supports Partizan and plays jazz piano on Tuesdays."
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields(content=text)))
    assert note.language == ENGLISH
    assert note_config("Rosa supports Partizan.") == ENGLISH  # short and unclear, in Latin letters
    assert note_config("Bruno's birthday is on 7 September.") == ENGLISH  # not Pidgin, though guessed so
    assert tokens(text) == tokens(text, ENGLISH) == [stem(w) for w in words(text) if w not in STOP_WORDS]
    assert found(tenant, person, "Which team does Rosa support?") == ["home-city"]
    assert Terms.of("home-city", "Where the person lives", text).language == ENGLISH


@pytest.mark.django_db
def test_unclear_or_unstemmable_text_falls_back_to_simple_words(tenant, person, actor):
    assert note_config("Булка") == NEUTRAL  # one Cyrillic word: no language to stem it in
    assert note_config("Mae Siân yn byw yng Nghaerdydd ac yn gweithio fel athrawes.") == NEUTRAL  # Welsh
    assert note_config("猫はベッドの上で寝ています") == NEUTRAL
    assert tokens("Булки и Булка", NEUTRAL) == ["булки", "и", "булка"]  # lowercased, nothing stemmed or dropped
    note = written(
        remember(
            team=tenant.team, person=person, actor=actor,
            **note_fields(key="cat", description="Кошка", content="Булка"),
        )
    )  # fmt: skip
    assert note.language == NEUTRAL
    assert found(tenant, person, "булка") == ["cat"]
    assert found(tenant, person, "Булки") == []  # the word as written, not a guess at its stem


@pytest.mark.django_db
def test_an_edit_reads_the_note_s_language_anew_and_its_words_with_it(tenant, person, actor):
    note = written(remember(team=tenant.team, person=person, actor=actor, **note_fields()))
    assert found(tenant, person, "Oslo") == ["home-city"]
    edited = written(edit_note(note=note, actor=actor, mode="replace", content="Анна живёт в Осло со своими собаками."))  # noqa: RUF001
    assert edited.language == "russian"
    assert Note.objects.get(pk=note.pk).language == "russian"
    assert found(tenant, person, "собака") == ["home-city"]
    assert found(tenant, person, "Oslo") == []
    # A repetition leaves the language as it is; only a write of the text reads it again.
    Note.objects.filter(pk=note.pk).update(language=NEUTRAL)
    forget_kept()  # a raw update is no write: no new bank version tells recall to read the bank again
    assert found(tenant, person, "собака") == []  # read as 'simple' words now: собаками is not собака
    note.refresh_from_db()
    note.repetitions += 1
    note.save(update_fields=["repetitions"])
    assert Note.objects.get(pk=note.pk).language == NEUTRAL


def test_bm25_reads_the_query_in_each_document_s_language():
    russian = Terms.of("dog", "Собака", "Анна забрала из приюта собаку.", language="russian")
    english = Terms.of("dog-en", "Dog", "Anna adopted a dog from the shelter.")
    cat = Terms.of("cat", "Кошка", "Анна завела кошку.", language="russian")
    keyword = bm25([russian, english, cat], "собаке dogs")
    assert keyword.matched == [{"собак", "dog"}, {"dog"}, set()]  # its key, in ASCII letters, is read as English
    assert keyword.scores[0] > 0
    assert keyword.scores[1] > 0
    # One language alone ranks as it always did.
    assert bm25([english], "dogs").strengths == [pytest.approx(1.0)]
