"""A long message is embedded as windows too (conversations.passages): the meaning half finds it by
a sentence deep inside, in the database and in the kept pair alike; erasure takes its windows."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from conversations.indexing import MESSAGES
from conversations.kept_pairs import forget_kept_pairs, vectors_kept
from conversations.models import Message, MessagePassage, MessageVector
from conversations.passages import PASSAGE_CHARS, PASSAGE_FROM, passage_windows
from conversations.queries import Ranking, rank_candidates, rank_messages
from conversations.services import erase_message, record_message
from memory.embedders import HashingEmbedder
from memory.text import tokens
from tests.support.http_stub import JsonHandler, serve

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _passages_on(settings):
    settings.SEARCH_PASSAGES = True


HEAD = 512  # characters the stand-in model reads of a text, as a small model's token limit allows
# The stand-in model's sense: these words mean one thing, said any of these ways.
SAME = {"fiddl": "violin", "violinist": "violin", "violin": "violin"}
FILLER = [
    "The tomatoes in the back garden needed water twice a day during the heatwave.",
    "We moved the compost heap closer to the shed so the wheelbarrow trips were shorter.",
    "Slugs ate most of the lettuce, so next year the beds get copper tape around them.",
    "The apple tree by the fence gave more fruit than the whole street could eat.",
    "Mulching the strawberries with straw kept the berries clean and the weeds down.",
]
DEEP = "My cousin Ingrid is a violinist in the Bergen orchestra."


def long_message() -> str:
    """About 3,000 characters of gardening, DEEP at about character 2,500."""
    before = " ".join(FILLER[i % len(FILLER)] for i in range(31))
    after = " ".join(FILLER[i % len(FILLER)] for i in range(6))
    return f"{before} {DEEP} {after}"


def sense(text: str, dim: int) -> list[float]:
    """The stand-in model's vector: the head of the text only, its words of one sense weighing ten."""
    hashed = HashingEmbedder(dim)
    vector = np.zeros(dim, dtype=np.float32)
    for token in tokens(text[:HEAD]):
        weight = 10.0 if token in SAME else 1.0
        vector += weight * hashed.embed([SAME.get(token, token)])[0]
    return vector.tolist()


@contextmanager
def head_only_model(settings, dim: int = 64) -> Iterator[list[str]]:
    """EMBEDDER=openai pointed at a stand-in embeddings endpoint that reads only each text's head."""
    seen: list[str] = []

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            inputs = self.read_json()["input"]
            seen.extend(inputs)
            data = [{"object": "embedding", "index": i, "embedding": sense(text, dim)} for i, text in enumerate(inputs)]
            self.send_json(200, {"object": "list", "data": data, "model": "head-only"})

    with serve(Handler, path="/v1") as url:
        settings.EMBEDDER = "openai"
        settings.EMBEDDING_BASE_URL = url
        settings.EMBEDDING_MODEL = "head-only"
        settings.EMBEDDING_DIM = dim
        yield seen


def test_a_long_message_is_cut_into_overlapping_sentence_windows_and_a_short_one_is_not():
    content = long_message()
    assert len(content) > 2_900
    assert content.index(DEEP) > 2_400
    assert passage_windows("A short message.") == []
    assert passage_windows("x " * (PASSAGE_FROM // 2)) == []
    windows = passage_windows(content)
    assert windows[0][0] == 0
    assert windows[-1][1] == len(content)
    for (start, end), (next_start, _) in itertools.pairwise(windows):
        assert end - start <= PASSAGE_CHARS
        assert start < next_start < end  # they overlap, and move on
        assert content[next_start - 2 : next_start] == ". "  # each starts at a sentence
    assert any(DEEP in content[start:end] for start, end in windows)  # a sentence whole in one


def test_a_long_message_gets_windows_and_a_short_one_does_not(conversation, index_inline):
    with index_inline():
        long = record_message(conversation=conversation, role="assistant", content=long_message())
        short = record_message(conversation=conversation, role="user", content="Thanks, that helps!")
    assert MessageVector.objects.filter(message__in=[long, short]).count() == 2
    assert not MessagePassage.objects.filter(message=short).exists()
    stored = list(MessagePassage.objects.filter(message=long).order_by("start").values_list("start", "end"))
    assert stored == passage_windows(long.content)
    assert MESSAGES.index([long.pk, short.pk]) == 0  # done: nothing stale, nothing embedded twice
    assert MessagePassage.objects.filter(message=long).count() == len(stored)


def search(tenant, query: str) -> list[dict]:
    response = tenant.client.post("/api/v1/tools/search_conversation", {"person": "ada", "query": query}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_meaning_half_finds_a_sentence_deep_in_a_long_message(tenant, person, conversation, index_inline, settings):
    with head_only_model(settings) as seen:
        with index_inline():
            long = record_message(conversation=conversation, role="assistant", content=long_message())
            record_message(conversation=conversation, role="user", content="How do I keep slugs off the lettuce?")
        assert any(DEEP in text and len(text) <= PASSAGE_CHARS for text in seen)  # the model read the window
        # No word of the query is in the message: only its meaning finds it, by its window.
        assert (
            rank_messages(agent=tenant.agent, person=person, query="fiddle", ranking=Ranking(meaning=False)).hits == []
        )
        assert [hit["message_id"] for hit in search(tenant, "fiddle")] == [long.pk]

        # Its head alone (as before windows) says nothing of it.
        MessagePassage.objects.filter(message=long).delete()
        forget_kept_pairs()  # not a write the search watches for: read the pair anew
        assert search(tenant, "fiddle") == []


def ranked(agent, person, query: str) -> list[tuple[int, float]]:
    found = rank_candidates(agent=agent, person=person, query=query, ranking=Ranking(words=False))
    return [(pk, found.totals[pk]) for pk in found.best_first]


def alike(these: list[tuple[int, float]], those: list[tuple[int, float]]) -> bool:
    """The same messages in the same order, their scores equal to float32's precision (the kept
    pair and the database compute a similarity in different precisions)."""
    return [pk for pk, _ in these] == [pk for pk, _ in those] and all(
        a == pytest.approx(b, abs=1e-5) for (_, a), (_, b) in zip(these, those, strict=True)
    )


def test_the_kept_pair_and_the_database_rank_windows_alike(tenant, person, conversation, index_inline, settings):
    with head_only_model(settings):
        with index_inline():
            long = record_message(conversation=conversation, role="assistant", content=long_message())
            other = record_message(conversation=conversation, role="user", content="My violin teacher retired.")
            record_message(conversation=conversation, role="assistant", content="The lettuce needs copper tape.")
        kept = ranked(tenant.agent, person, "fiddle")
        assert vectors_kept(tenant.agent, person) == "exact"  # answered by the kept pair
        assert {pk for pk, _ in kept} == {long.pk, other.pk}
        settings.SEARCH_KEPT_MESSAGES = 0
        forget_kept_pairs()
        assert alike(ranked(tenant.agent, person, "fiddle"), kept)
        assert vectors_kept(tenant.agent, person) is None  # answered by the database

        # Windows stored after the pair was kept come with their message's vector.
        settings.SEARCH_KEPT_MESSAGES = 200_000
        assert alike(ranked(tenant.agent, person, "fiddle"), kept)
        with index_inline():
            later = record_message(conversation=conversation, role="user", content=long_message())
        both = ranked(tenant.agent, person, "fiddle")
        assert later.pk in {pk for pk, _ in both}
        settings.SEARCH_KEPT_MESSAGES = 0
        assert alike(ranked(tenant.agent, person, "fiddle"), both)


def test_erasing_a_long_message_drops_its_windows(tenant, person, conversation, index_inline, settings):
    with head_only_model(settings):
        with index_inline():
            long = record_message(conversation=conversation, role="assistant", content=long_message())
        assert [hit["message_id"] for hit in search(tenant, "fiddle")] == [long.pk]  # the pair is kept now
        erase_message(message=long)
        assert not MessagePassage.objects.filter(message_id=long.pk).exists()
        assert not MessageVector.objects.filter(message_id=long.pk).exists()
        assert search(tenant, "fiddle") == []  # neither the kept pair nor the database
        settings.SEARCH_KEPT_MESSAGES = 0
        assert search(tenant, "fiddle") == []
        assert MESSAGES.index([long.pk]) == 0  # a late task for it stores nothing
        assert not MessagePassage.objects.filter(message_id=long.pk).exists()
        assert rank_messages(agent=tenant.agent, person=person, query="fiddle").hits == []


def test_the_import_job_counts_the_windows_embedded(tenant, index_inline):
    from tests.conversations.test_import import conversation, post_import

    messages = [
        {"role": "user", "content": "Any tips for the garden?", "created_at": "2023-05-08T13:56:00+00:00", "external_id": "m1"},
        {"role": "assistant", "content": long_message(), "created_at": "2023-05-08T13:57:10+00:00", "external_id": "m2"},
    ]  # fmt: skip
    response = post_import(tenant, [conversation(messages=messages)])
    assert response.status_code == 201, response.content
    job = response.json()
    assert (job["messages_embedded"], job["passages_embedded"], job["messages_waiting"]) == (0, 0, 2)
    with index_inline():
        MESSAGES.schedule_many(list(Message.objects.filter(team=tenant.team).values_list("pk", flat=True)))
    done = tenant.client.get(job["url"]).json()
    expected = len(passage_windows(long_message()))
    assert (done["status"], done["messages_embedded"], done["passages_embedded"]) == ("done", 2, expected)


def test_a_long_message_embedded_before_windows_gets_them_from_the_reconciler(conversation, index_inline):
    with index_inline():
        long = record_message(conversation=conversation, role="assistant", content=long_message())
        short = record_message(conversation=conversation, role="user", content="Thanks, that helps!")
    MessagePassage.objects.all().delete()  # as it was embedded before messages had windows
    assert list(MESSAGES.stale()) == [long]
    report = MESSAGES.reconcile()
    assert (report.checked, report.indexed) == (1, 1)
    assert MessagePassage.objects.filter(message=long).count() == len(passage_windows(long.content))
    assert not MESSAGES.stale().exists()
    assert not MessagePassage.objects.filter(message=short).exists()


def test_without_search_passages_no_window_is_made_or_read(tenant, person, conversation, index_inline, settings):
    settings.SEARCH_PASSAGES = False
    with head_only_model(settings):
        with index_inline():
            long = record_message(conversation=conversation, role="assistant", content=long_message())
        assert MessageVector.objects.filter(message=long).exists()
        assert not MessagePassage.objects.exists()
        assert not MESSAGES.stale().exists()
        assert search(tenant, "fiddle") == []  # its head alone says nothing of it
