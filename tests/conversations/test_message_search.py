"""The conversation search: message vectors written after commit, the reconciler, words and
meaning together, neighbouring messages, the embedder being down, and isolation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conversations.indexing import MESSAGES
from conversations.kept_pairs import forget_kept_pairs
from conversations.models import MessageVector
from conversations.queries import MEANING_WEIGHT, rank_candidates, rank_messages, search_messages
from conversations.services import erase_message, record_message, start_conversation
from memory.indexing import namespace_for
from tests.memory.embedding_server import Behaviour, embedding_settings
from tests.support.factories import AgentFactory, PersonFactory, chat

pytestmark = pytest.mark.django_db


def say(conversation, content, role="user"):
    return record_message(conversation=conversation, role=role, content=content)


def texts(hits):
    return [hit.message.content for hit in hits]


def test_a_recorded_message_is_embedded_after_commit(tenant, conversation, index_inline):
    with index_inline() as callbacks:
        message = say(conversation, "Ada adopted a cat named Miso")
        assert not MessageVector.objects.exists()  # nothing is embedded inside the transaction
    assert len(callbacks) == 1
    vector = MessageVector.objects.get(message=message)
    assert (vector.team_id, vector.namespace, vector.model, vector.dim) == (
        tenant.team.pk,
        namespace_for(tenant.team.pk),
        "hashing-v1-256",
        256,
    )
    assert np.isclose(np.linalg.norm(np.array(vector.embedding, dtype=np.float32)), 1.0)
    assert not MESSAGES.stale().exists()


def test_no_indexing_is_scheduled_without_an_embedder(conversation, settings, django_capture_on_commit_callbacks):
    settings.EMBEDDER = "none"
    with django_capture_on_commit_callbacks() as callbacks:
        say(conversation, "Nothing to embed with")
    assert callbacks == []


def test_a_deleted_message_takes_its_vector_and_leaves_every_search(tenant, person, conversation, index_inline):
    with index_inline():
        doomed = say(conversation, "My passport number is K1234")
        say(conversation, "The weather in Oslo is grey", role="assistant")
    assert MessageVector.objects.filter(message=doomed).exists()
    assert texts(search_messages(agent=tenant.agent, person=person, query="passport number K1234"))
    doomed_id = doomed.pk
    erase_message(message=doomed)
    assert not MessageVector.objects.filter(message_id=doomed_id).exists()
    assert search_messages(agent=tenant.agent, person=person, query="passport number K1234") == []
    assert MESSAGES.index([doomed_id]) == 0  # a late task for a deleted message writes nothing
    assert not MessageVector.objects.filter(message_id=doomed_id).exists()


def test_index_messages_is_safe_to_run_twice(conversation):
    message = say(conversation, "Ada lives in Oslo")
    assert MESSAGES.index([message.pk]) == 1
    assert MESSAGES.index([message.pk]) == 0
    assert MessageVector.objects.count() == 1


def test_the_reconciler_and_reindex_embed_messages_left_without_vectors(conversation, settings, capsys):
    from django.core.management import call_command

    settings.EMBEDDER = "none"
    for i in range(3):
        say(conversation, f"message number {i}")
    settings.EMBEDDER = "hashing"
    assert MESSAGES.stale().count() == 3
    assert MESSAGES.reconcile(batch_size=2).indexed == 3
    assert not MESSAGES.stale().exists()

    settings.EMBEDDING_DIM = 64  # a model change: every message is stale again
    assert MESSAGES.stale().count() == 3
    call_command("reindex", "--batch-size", "2")
    out = capsys.readouterr().out
    assert "3 message(s) to index with hashing-v1-64" in out
    assert "Indexed 3 message(s)." in out
    assert set(MessageVector.objects.values_list("model", flat=True)) == {"hashing-v1-64"}  # old model dropped


def test_a_vector_of_another_model_or_namespace_is_invisible(tenant, person, conversation, index_inline, mocker):
    with index_inline():
        message = say(conversation, "We talked about the weather")
    stored = np.array(MessageVector.objects.get(message=message).embedding, dtype=np.float32)
    mocker.patch("memory.vectors.embed_query", return_value=(stored, ""))
    query = "anything at all in other words"  # shares no word: only the vector can find it
    assert texts(search_messages(agent=tenant.agent, person=person, query=query)) == [message.content]
    # Rewritten behind the write paths' back (which never change a message's vector under one
    # model): seen by a process reading the pair afresh, as another would.
    MessageVector.objects.update(model="another-model")
    forget_kept_pairs()
    assert search_messages(agent=tenant.agent, person=person, query=query) == []
    MessageVector.objects.update(model="hashing-v1-256", namespace="team:999999")
    forget_kept_pairs()
    assert search_messages(agent=tenant.agent, person=person, query=query) == []


def test_meaning_finds_a_message_that_shares_no_word_and_the_floor_keeps_weak_ones_out(
    tenant, person, conversation, index_inline, mocker, settings
):
    with index_inline():
        close = say(conversation, "Severe reaction to peanuts")
        far = say(conversation, "The train was late again", role="assistant")
    close_vector = np.array(MessageVector.objects.get(message=close).embedding, dtype=np.float32)
    far_vector = np.array(MessageVector.objects.get(message=far).embedding, dtype=np.float32)
    # A query vector at cosine 0.8 from `close` whose other part is orthogonal to both messages.
    other = np.random.default_rng(7).normal(size=close_vector.shape).astype(np.float32)
    for basis in (close_vector, far_vector - close_vector * float(far_vector @ close_vector)):
        basis = basis / np.linalg.norm(basis)
        other -= basis * float(other @ basis)
    other /= np.linalg.norm(other)
    query_vector = 0.8 * close_vector + 0.6 * other
    assert float(query_vector @ far_vector) < settings.VECTOR_FLOOR
    mocker.patch("memory.vectors.embed_query", return_value=(query_vector, ""))
    found = search_messages(agent=tenant.agent, person=person, query="is there anything I am unable to eat?")
    assert texts(found) == ["Severe reaction to peanuts"]  # `far` is below VECTOR_FLOOR
    expected = MEANING_WEIGHT * (0.8 - settings.VECTOR_FLOOR) / (1 - settings.VECTOR_FLOOR)
    assert found[0].score == pytest.approx(expected, abs=1e-3)


def test_rare_words_outweigh_common_ones(tenant, person, conversation):
    chat(
        conversation,
        [
            ("Hey Caroline, how are you?", "Hi Caroline! Good to see you, Caroline"),
            ("Caroline, Caroline, are you up?", "I went to the pottery class yesterday"),
            ("Caroline here again", "Morning Caroline"),
        ],
    )
    # ts_rank_cd weighs every word alike (two Carolines beat one pottery); the rarer word wins here.
    hits = search_messages(agent=tenant.agent, person=person, query="When did Caroline go to pottery?")
    assert texts(hits)[0] == "I went to the pottery class yesterday"


def test_a_message_is_given_a_share_of_its_neighbours_but_never_found_by_them_alone(tenant, person, conversation):
    other = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(other, [("My hiking boots need a repair", "Try the shop on the corner")])
    chat(
        conversation,
        [
            ("Did you go hiking last weekend?", "Yes, we climbed Rainier."),
            ("Nice, how was the view from the summit?", "Clear all the way to the coast."),
        ],
    )
    hits = search_messages(agent=tenant.agent, person=person, query="hiking on Rainier", limit=10)
    # The question that led to Rainier outranks the other message about hiking; messages that
    # share no word (and, with this embedder, no meaning) with the query are never returned.
    assert texts(hits) == [
        "Yes, we climbed Rainier.",
        "Did you go hiking last weekend?",
        "My hiking boots need a repair",
    ]


def test_exclusions_and_limit_apply_after_ranking(tenant, person, conversation):
    recorded = chat(conversation, [("Pottery on Monday", "Pottery again on Tuesday"), ("More pottery", "Pottery!")])
    hits = search_messages(agent=tenant.agent, person=person, query="pottery", limit=2, exclude_ids={recorded[0].pk})
    assert len(hits) == 2
    assert recorded[0].pk not in {hit.message.pk for hit in hits}


def test_one_ranking_answers_every_exclusion_as_a_search_would_and_never_shows_a_message_erased_since(
    tenant, person, conversation
):
    recorded = chat(conversation, [("Pottery on Monday", "Pottery again on Tuesday"), ("More pottery", "Pottery!")])
    ranked = rank_candidates(agent=tenant.agent, person=person, query="pottery")
    for excluded in (set(), {recorded[0].pk}, {recorded[1].pk, recorded[3].pk}):
        expected = search_messages(agent=tenant.agent, person=person, query="pottery", limit=2, exclude_ids=excluded)
        assert [hit.message.pk for hit in ranked.hits(limit=2, exclude_ids=excluded)] == [
            hit.message.pk for hit in expected
        ]
    before = [hit.message.pk for hit in ranked.hits(limit=4)]
    assert len(before) >= 2
    erase_message(message=next(m for m in recorded if m.pk == before[0]))
    assert [hit.message.pk for hit in ranked.hits(limit=4)] == before[1:]


def test_a_text_said_again_word_for_word_is_shown_once_and_the_next_one_takes_its_place(tenant, person, conversation):
    pasted = "The gate code for the allotment is 4417"
    first = say(conversation, pasted)
    say(conversation, "Thanks, noted", role="assistant")
    again = say(conversation, pasted)  # pasted a second time, later
    other = say(conversation, "The allotment gate sticks in the rain", role="assistant")
    ranked = rank_candidates(agent=tenant.agent, person=person, query="allotment gate code 4417")
    assert {first.pk, again.pk} <= set(ranked.best_first[:2])  # both copies rank first, as ever
    for read_ahead in (False, True):
        hits = ranked.hits(limit=2, read_ahead=read_ahead)
        assert texts(hits) == [pasted, other.content]  # one copy, then the next candidate
    found = search_messages(agent=tenant.agent, person=person, query="allotment gate code 4417", limit=2)
    assert texts(found) == [pasted, other.content]


def test_when_the_embedder_is_down_words_still_answer_and_the_search_says_so(
    tenant, person, conversation, index_inline, settings
):
    behaviour = Behaviour(mode="ok", dim=16)
    with embedding_settings(settings, behaviour):
        with index_inline():
            say(conversation, "Ada lives in Oslo")
            say(conversation, "The weather is grey", role="assistant")
        assert MessageVector.objects.count() == 2
        assert rank_messages(agent=tenant.agent, person=person, query="Where is Oslo?").degraded == ""

        behaviour.mode = "500"  # a new question: a vector already computed for a query stays usable
        found = rank_messages(agent=tenant.agent, person=person, query="Which city is Oslo?")
        assert texts(found.hits) == ["Ada lives in Oslo"]
        assert "embedder unavailable" in found.degraded
        assert texts(search_messages(agent=tenant.agent, person=person, query="Which city is Oslo?")) == [
            "Ada lives in Oslo"
        ]
        with index_inline():  # a message written while it is down is recorded all the same
            later = say(conversation, "Ada moved to Bergen")
        assert list(MESSAGES.stale()) == [later]
        behaviour.mode = "ok"
        assert MESSAGES.reconcile().indexed == 1


def test_vectors_never_reach_another_agent_person_or_team(
    tenant, other_tenant, person, conversation, index_inline, mocker
):
    words = "Our secret island is Utvaer"  # the same words, so the same vector, in every conversation
    bob = PersonFactory(team=tenant.team, external_id="bob")
    second_agent = AgentFactory(team=tenant.team)
    foreign_person = PersonFactory(team=other_tenant.team, external_id="ada")
    with index_inline():
        own = say(conversation, words)
        bobs = say(start_conversation(team=tenant.team, agent=tenant.agent, person=bob), words)
        agents = say(start_conversation(team=tenant.team, agent=second_agent, person=person), words)
        foreign = say(
            start_conversation(team=other_tenant.team, agent=other_tenant.agent, person=foreign_person), words
        )
    assert MessageVector.objects.count() == 4
    stored = np.array(MessageVector.objects.get(message=own).embedding, dtype=np.float32)
    mocker.patch("memory.vectors.embed_query", return_value=(stored, ""))

    def found(agent, who, query):
        return [hit.message.pk for hit in search_messages(agent=agent, person=who, query=query, limit=10)]

    for query in ("secret island Utvaer", "nothing in common here"):  # words and meaning, then meaning alone
        assert found(tenant.agent, person, query) == [own.pk]
        assert found(tenant.agent, bob, query) == [bobs.pk]
        assert found(second_agent, person, query) == [agents.pk]
        assert found(other_tenant.agent, foreign_person, query) == [foreign.pk]


def test_names_of_the_participants_are_not_searched_and_the_named_side_counts_more(tenant, conversation):
    from conversations.queries import DEFAULT_RANKING, Ranking

    person = conversation.person  # external_id "ada" in the factories; the agent is renamed below
    tenant.agent.name = "Melanie"
    tenant.agent.save(update_fields=["name"])
    chat(
        conversation,
        [
            ("Hey Melanie, good to see you!", "Hi! I painted a sunset over the lake last week"),
            ("I painted my kitchen walls yesterday", "Nice, what colour?"),
        ],
    )

    def ranked(query, ranking=DEFAULT_RANKING):
        return texts(rank_messages(agent=tenant.agent, person=person, query=query, limit=3, ranking=ranking).hits)

    # "Melanie" names the agent: it is not searched (the greeting does not come first), and the
    # agent's own message about painting outranks the person's.
    found = ranked("What did Melanie paint?")
    assert found[0] == "Hi! I painted a sunset over the lake last week"
    assert found.index("I painted my kitchen walls yesterday") > 0
    # With the names searched and both sides alike, the greeting (a rarer word) comes first.
    plain = Ranking(unname=False, other_speaker_share=1.0)
    assert ranked("What did Melanie paint?", plain)[0] == "Hey Melanie, good to see you!"
    # A query that names nobody ranks both sides alike.
    assert ranked("paint")[0] != "Hey Melanie, good to see you!"


def test_the_other_sides_question_lifts_the_named_sides_answer(tenant, conversation):
    """The other side keeps OTHER_SPEAKER_SHARE of its whole score, yet gives its neighbours all of
    its own: the person's question is what finds the agent's answer that shares one word with it."""
    from dataclasses import replace

    from conversations.queries import DEFAULT_RANKING

    person = conversation.person
    tenant.agent.name = "Melanie"
    tenant.agent.save(update_fields=["name"])
    record_message(conversation=conversation, role="user", content="Which video game did you play at the tournament?")
    record_message(conversation=conversation, role="assistant", content="Counter-Strike, my favourite game")
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    record_message(conversation=later, role="assistant", content="I play the video of my sister's wedding")
    record_message(conversation=later, role="user", content="Lovely")
    query = "Which video game did Melanie play at the tournament?"

    def ranked(ranking=DEFAULT_RANKING):
        return texts(rank_messages(agent=tenant.agent, person=person, query=query, limit=3, ranking=ranking).hits)

    answer, other = "Counter-Strike, my favourite game", "I play the video of my sister's wedding"
    found = ranked()
    assert found.index(answer) < found.index(other)
    # Discounting the question before its neighbours read it (the ranking before) lost the answer.
    before = ranked(replace(DEFAULT_RANKING, speaker_share_of_total=False, other_speaker_share=0.4))
    assert before.index(other) < before.index(answer)


def said_by_both(tenant, conversation, content):
    """The same words said by the person, then by the agent in a later conversation: alike, they
    rank the agent's first (the later said)."""
    said = record_message(conversation=conversation, role="user", content=content)
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=conversation.person)
    return said, record_message(conversation=later, role="assistant", content=content)


def first_hit(tenant, person):
    from conversations.queries import DEFAULT_RANKING

    def first(query, ranking=DEFAULT_RANKING):
        return rank_messages(agent=tenant.agent, person=person, query=query, limit=2, ranking=ranking).hits[0]

    return first


def test_when_both_sides_are_named_the_first_is_the_one_asked_about_unless_named_together(tenant, conversation):
    from dataclasses import replace

    from conversations.queries import DEFAULT_RANKING

    person = conversation.person  # "ada"
    tenant.agent.name = "Melanie"
    tenant.agent.save(update_fields=["name"])
    said, replied = said_by_both(tenant, conversation, "Dune is the novel I recommend")
    first = first_hit(tenant, person)

    assert first("Which novel did Ada recommend to Melanie?").message.pk == said.pk
    assert first("Which novel did Melanie recommend to Ada?").message.pk == replied.pk
    # Named together ("and", "&", "both"), neither side is the subject: both rank alike.
    for together in ("Which novel do Ada and Melanie recommend?", "Which novel do Ada & Melanie recommend?",
                     "Which novel did both Ada, Melanie recommend?"):  # fmt: skip
        assert first(together).message.pk == replied.pk, together
    # Without the rule, both sides named count alike.
    alike = replace(DEFAULT_RANKING, subject_first=False)
    assert first("Which novel did Ada recommend to Melanie?", alike).message.pk == replied.pk


@pytest.mark.parametrize(
    ("said", "asked", "language"),
    [
        ("Вчера я забрала из приюта собаку, её зовут Булка.", "Что я рассказывала о своей собаке?", "russian"),  # noqa: RUF001
        ("Ich lese gerade einen Roman von Thomas Mann.", "Welche Romane lese ich?", "german"),
    ],
)
def test_words_are_matched_in_the_language_they_are_said_in(tenant, person, conversation, said, asked, language):
    from conversations.queries import Ranking

    message = say(conversation, said)
    say(conversation, "Something else entirely, in English.")
    assert message.language == language
    # Another word form than the message's ("собаке" for "собаку", "Romane" for "Roman") is found by words alone.
    found = rank_messages(agent=tenant.agent, person=person, query=asked, ranking=Ranking(meaning=False)).hits
    assert [hit.message.pk for hit in found] == [message.pk]


def test_a_message_is_given_a_smaller_share_of_the_messages_two_away(tenant, person, conversation):
    from conversations.queries import DEFAULT_RANKING, Ranking

    chat(
        conversation,
        [
            ("I adopted a dog last week!", "Congratulations! What is his name?"),
            ("His name is Max, he is a little beagle", "Cute"),
        ],
    )
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(later, [("My neighbour walks a beagle", "Nice")])  # later, so it wins a tie

    def ranked(ranking):
        found = rank_messages(agent=tenant.agent, person=person, query="adopted beagle", limit=5, ranking=ranking)
        return texts(found.hits)

    # "His name is Max..." answers the question two turns before, across the agent's reply: the
    # adoption lifts it above the neighbour's beagle, which it ties on words alone.
    found = ranked(DEFAULT_RANKING)
    assert found.index("His name is Max, he is a little beagle") < found.index("My neighbour walks a beagle")
    alone = ranked(Ranking(second_neighbour_share=0.0))
    assert alone.index("My neighbour walks a beagle") < alone.index("His name is Max, he is a little beagle")
    # The reply in between shares no word with the query: its neighbours never find it alone.
    assert "Congratulations! What is his name?" not in found


def test_a_date_the_query_names_is_when_things_were_said_not_words(tenant, person, conversation):
    from conversations.queries import DEFAULT_RANKING, Ranking

    old = chat(conversation, [("I cooked lasagna for the whole family", "Sounds delicious")], days_ago=400)[0]
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(later, [("I cooked lasagna again", "Yum")])  # newer: first when the date is not read
    chat(later, [(f"The {old.created_at.year} harvest was small", "Oh no")], days_ago=1)
    asked = f"What did I cook with lasagna on {old.created_at:%d %B, %Y}?"

    def ranked(query, ranking=DEFAULT_RANKING):
        return texts(rank_messages(agent=tenant.agent, person=person, query=query, limit=5, ranking=ranking).hits)

    found = ranked(asked)
    assert found[0] == "I cooked lasagna for the whole family"
    # The year is not searched as a word (the harvest shares nothing else with the question).
    assert not any("harvest" in text for text in found)
    plain = ranked(asked, Ranking(dates=False))
    assert plain[0] == "I cooked lasagna again"
    assert any("harvest" in text for text in plain)
    # A date when nothing was said weighs nobody down: the ranking is the undated one's.
    assert ranked("What did I cook with lasagna on 1 March, 2001?") == ranked("What did I cook with lasagna?")


def test_a_relative_date_is_read_against_when_the_query_is_asked(tenant, person, conversation):
    from datetime import timedelta

    from conversations.queries import DEFAULT_RANKING, Ranking

    early = chat(conversation, [("I started listening to Phoebe Bridgers", "Great choice")], days_ago=40)[0]
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(later, [("I started listening to Taylor Swift again", "Nice")], days_ago=2)  # newer: first undated
    asked = "Which artist did I start listening to two weeks ago?"
    at = early.created_at + timedelta(days=14)  # asked two weeks after the early message

    def ranked(ranking=DEFAULT_RANKING, now=at):
        found = rank_messages(agent=tenant.agent, person=person, query=asked, limit=5, ranking=ranking, now=now)
        return texts(found.hits)

    assert ranked()[0] == "I started listening to Phoebe Bridgers"
    assert ranked(Ranking(relative_dates=False))[0] == "I started listening to Taylor Swift again"
    # Asked today, two weeks ago holds neither: nothing is weighed down.
    assert ranked(now=None) == ranked(Ranking(relative_dates=False), now=None)


@pytest.mark.parametrize("kept", [True, False], ids=["kept pair", "in SQL"])
def test_the_words_half_evens_out_message_length(tenant, person, conversation, settings, kept):
    from conversations.queries import DEFAULT_RANKING, Ranking

    if not kept:
        settings.SEARCH_KEPT_MESSAGES = 0
    forget_kept_pairs()
    short = "My pottery class starts on Monday"
    rambling = (
        "Here is everything about the studio: glazes, kilns, wheels, clay bodies, firing schedules, "
        "studio etiquette, membership fees, parking, opening hours, safety rules, aprons, towels, "
        "trimming tools, storage shelves, and the pottery class many members join."
    )
    chat(conversation, [(short, "Have fun!")], days_ago=10)
    chat(conversation, [("Tell me about the studio", rambling)], days_ago=1)  # newer: first on a tie

    def ranked(ranking):
        asked = rank_messages(agent=tenant.agent, person=person, query="When is the pottery class?", ranking=ranking)
        return texts(asked.hits)

    words_only = Ranking(meaning=False)
    assert ranked(words_only)[0] == short
    # Both hold "pottery" and "class": without the normalisation they tie, and the newer goes first.
    assert ranked(replace(words_only, length_b=0.0))[0] == rambling
    assert ranked(DEFAULT_RANKING)[0] == short


def test_a_query_naming_no_side_asks_about_the_side_its_pronouns_name(tenant, conversation):
    from conversations.queries import DEFAULT_RANKING

    person = conversation.person
    said, replied = said_by_both(tenant, conversation, "Dune is the novel worth reading")
    first = first_hit(tenant, person)

    assert first("Which novel did I say was worth reading?").message.pk == said.pk
    assert first("Which novel worth reading did you recommend?").message.pk == replied.pk
    # A bare "you" names no side: both rank alike.
    assert first("Can you name a novel worth reading?").message.pk == replied.pk
    # Without the rule, the pronouns count for nothing.
    alike = replace(DEFAULT_RANKING, pronouns=False)
    assert first("Which novel did I say was worth reading?", alike).message.pk == replied.pk


def test_a_long_message_gives_its_neighbours_a_smaller_share(tenant, person, conversation):
    from conversations.queries import DEFAULT_RANKING, NEIGHBOURS_GIVE_UP_TO

    long_answer = (
        "Here are some ideas for your garden: plant tomatoes along the south fence, keep basil near "
        "the kitchen door, water deeply twice a week, mulch the beds with straw, rotate the beans "
        "every season, prune the apple tree in late winter, net the strawberries against birds, sow "
        "lettuce every fortnight, stake the dahlias before they flop, leave a wild corner for bees, "
        "and compost coffee grounds for the roses"
    )
    thanks, roses = (
        "Thanks, the roses in the front yard look great now, all of them, even the old ones",
        "The roses look great",
    )
    chat(conversation, [("Any tips?", long_answer), (thanks, "Glad to help")])
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=person)
    chat(later, [(roses, "Lovely")])

    def ranked(ranking=DEFAULT_RANKING):
        found = rank_messages(
            agent=tenant.agent, person=person, query="what about the roses and the compost?", limit=5, ranking=ranking
        )
        return texts(found.hits)

    assert len(set(long_answer.split())) > NEIGHBOURS_GIVE_UP_TO
    # On its own words the thanks after the long answer comes a little below the later roses; the
    # answer, which matches the query somewhere in its seventy words, lifts it less than that.
    found = ranked()
    assert found.index(roses) < found.index(thanks)
    whole = ranked(replace(DEFAULT_RANKING, neighbours_give_up_to=0))
    assert whole.index(thanks) < whole.index(roses)


def test_a_message_left_out_is_no_candidate_and_does_not_scale_the_others(tenant, person, conversation):
    """The composer leaves the turn's own message out of its search: recorded before the search, it
    would match its own words best, and every other keyword score is scaled against the best one's."""
    from conversations.queries import start_search

    said = say(conversation, "We booked the cabin for August")
    say(conversation, "Great, I will pack the fishing rods", role="assistant")
    later = start_conversation(team=tenant.team, agent=tenant.agent, person=person)  # no neighbour of theirs
    asked = say(later, "Which cabin did we book for the August trip by the lake?")

    def ranked(leave_out=frozenset()):
        query = asked.content
        return start_search(agent=tenant.agent, person=person, query=query, leave_out=leave_out).finish()

    every = ranked()
    assert every.best_first[0] == asked.pk
    without = ranked(frozenset({asked.pk}))
    assert asked.pk not in without.best_first
    assert without.best_first[0] == said.pk
    assert without.totals[said.pk] > every.totals[said.pk]
