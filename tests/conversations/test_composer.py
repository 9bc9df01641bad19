"""The composer: one ceiling, eviction from the right, passages, profiles and degradation."""

from __future__ import annotations

import itertools
import json
import random
import time
from unittest import mock

import pytest
from django.db import OperationalError, connection

from conversations.composer import LAYERS, MEMORY_UNAVAILABLE_NOTICE, compose
from conversations.exceptions import MemoryUnavailable
from conversations.models import Message
from conversations.queries import meaning_text
from conversations.services import record_message, take_turn, update_summary
from memory.exceptions import InvalidNote
from memory.services import remember
from tests.memory.embedding_server import Behaviour, embedding_settings
from tests.support.factories import chat

pytestmark = pytest.mark.django_db


def turn(tenant, person, conversation, text, **kwargs):
    message = record_message(conversation=conversation, role="user", content=text)
    return compose(
        team=tenant.team, agent=tenant.agent, person=person, conversation=conversation, message=message, **kwargs
    )


@pytest.fixture
def rich(tenant, person, actor, conversation):
    """A conversation with a summary, notes, searchable history and a long window."""
    chat(
        conversation,
        [
            (f"Old topic {i}: the lighthouse keeper story part {i}. " + "x" * 300, "Noted. " + "y" * 300)
            for i in range(20)
        ],
    )
    update_summary(conversation=conversation, summary="They talked about lighthouses. " * 20, through_order=10)
    for i in range(10):
        remember(
            team=tenant.team, person=person, actor=actor, key=f"fact-{i}", description=f"Fact {i}", content="z" * 500
        )
    return conversation


def test_costs_cover_every_layer_and_the_prefix_stays_under_the_ceiling(tenant, person, rich, settings):
    settings.COMPOSER_CEILING = 18_000
    result = turn(tenant, person, rich, "Tell me about the lighthouse keeper story again")
    assert set(result.costs) == set(LAYERS)
    assert result.prefix_chars <= 18_000
    assert {b.layer for b in result.blocks} >= {"last_exchange", "summary", "notes", "passages", "deeper_window"}
    for block in result.blocks:
        assert result.costs[block.layer] == block.chars


@pytest.mark.parametrize("ceiling", [16_000, 12_000, 9_000, 6_000, 3_000, 1_500])
def test_room_is_given_up_from_the_right(tenant, person, rich, settings, ceiling):
    """Under a binding ceiling a layer is trimmed only after everything to its right is gone."""
    settings.COMPOSER_CEILING = 30_000
    roomy = turn(tenant, person, rich, "Tell me about the lighthouse keeper story again").costs
    settings.COMPOSER_CEILING = ceiling
    tight = turn(tenant, person, rich, "Tell me about the lighthouse keeper story again")
    assert tight.prefix_chars <= ceiling
    order = ["summary", "notes", "passages", "deeper_window"]
    for index, layer in enumerate(order):
        if (tight.costs[layer] < roomy[layer] and tight.costs[layer] > 0) or tight.costs[layer] == 0 < roomy[layer]:
            for right in order[index + 1 :]:
                assert tight.costs[right] == 0, (layer, right, tight.costs)


def test_persona_is_not_drawn_from_the_budget(tenant, person, rich, settings):
    settings.COMPOSER_CEILING = 5_000
    message = record_message(conversation=rich, role="user", content="What about the lighthouse?")
    same = {"team": tenant.team, "agent": tenant.agent, "person": person, "conversation": rich, "message": message}
    plain = compose(**same, persona="")
    with_persona = compose(**same, persona="P" * 4_000)
    assert with_persona.costs["persona"] == 4_000
    assert with_persona.prefix_chars == plain.prefix_chars
    assert with_persona.blocks[0].layer == "persona"


def test_the_last_exchange_is_always_present(tenant, person, rich, settings):
    settings.COMPOSER_CEILING = 1_000
    result = turn(tenant, person, rich, "And then?")
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user"]
    assert result.messages[-1]["content"] == "And then?"
    assert result.costs["last_exchange"] > 0
    assert result.prefix_chars <= 1_000


def test_role_alternation_is_preserved_when_messages_repeat_a_role(tenant, person, conversation):
    chat(conversation, [("Hi", "Hello!"), ("How are you?", "Fine.")])
    record_message(conversation=conversation, role="user", content="Are you there?")
    result = turn(tenant, person, conversation, "Hello??")
    roles = [m["role"] for m in result.messages]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert result.messages[-1]["content"] == "Are you there?\n\nHello??"


def test_passages_are_capped_at_four_and_2000_characters(tenant, person, conversation, settings):
    chat(
        conversation,
        [(f"My sailing trip number {i} to the fjords was wonderful. " + "s" * 200, "Lovely.") for i in range(12)],
        days_ago=30,
    )
    settings.COMPOSER_CEILING = 4_000  # the window cannot reach back to the old trips
    result = turn(tenant, person, conversation, "Remind me about my sailing trips to the fjords")
    passages = next(b for b in result.blocks if b.layer == "passages")
    lines = [json.loads(line) for line in passages.text.splitlines() if line.startswith("{")]
    assert 1 <= len(lines) <= 4
    assert passages.chars <= 2_000
    assert all("sailing" in line["text"] for line in lines)


def test_passages_never_become_history_messages(tenant, person, conversation, settings):
    chat(conversation, [("I adopted a greyhound called Pixel", "What a name!")], days_ago=40)
    chat(conversation, [("Filler " + "f" * 700, "ok " + "o" * 700) for _ in range(4)])
    settings.COMPOSER_CEILING = 3_000  # the window holds the last exchange and not much more
    result = turn(tenant, person, conversation, "What was my greyhound called?")
    passages = next(b for b in result.blocks if b.layer == "passages")
    assert "Pixel" in passages.text
    assert all("Pixel" not in m["content"] for m in result.messages)


def test_passages_already_in_the_window_are_dropped(tenant, person, conversation, settings):
    chat(conversation, [("I adopted a greyhound called Pixel", "What a name!"), ("It rained", "Sorry.")])
    settings.COMPOSER_CEILING = 18_000
    result = turn(tenant, person, conversation, "What was my greyhound called?")
    assert any("Pixel" in m["content"] for m in result.messages)
    assert "passages" not in {b.layer for b in result.blocks}
    assert result.passages_used == []


@pytest.mark.parametrize("text", ["thanks", "ok cool", "Thank you!", "yes"])
def test_a_message_with_fewer_than_two_real_words_is_not_searched(tenant, person, conversation, text, mocker):
    chat(conversation, [("thanks for the cool tips", "ok"), ("Filler", "Filler")], days_ago=3)
    search = mocker.patch("conversations.composer.start_search")
    result = turn(tenant, person, conversation, text)
    search.assert_not_called()
    assert result.costs["passages"] == 0


def test_memory_only_contains_no_conversation_text(tenant, person, actor, conversation):
    chat(conversation, [("My secret codename is BLUEBIRD", "Understood."), ("I live in Oslo", "Nice.")])
    update_summary(conversation=conversation, summary="BLUEBIRD lives in Oslo", through_order=4)
    remember(team=tenant.team, person=person, actor=actor, key="home", description="Home", content="Oslo")
    result = turn(
        tenant, person, conversation, "Where do I live? Also BLUEBIRD?", profile="memory_only", persona="Coach"
    )
    assert [m["role"] for m in result.messages] == ["user"]
    rendered = json.dumps([b.text for b in result.blocks if b.layer not in ("last_exchange",)])
    assert "BLUEBIRD" not in rendered
    assert "I live in Oslo" not in json.dumps(result.messages)
    assert {b.layer for b in result.blocks} == {"persona", "notes", "last_exchange"}
    assert result.costs["summary"] == result.costs["passages"] == result.costs["deeper_window"] == 0


def test_notes_layer_puts_the_page_first_and_content_is_framed_as_data(tenant, person, actor, conversation):
    remember(team=tenant.team, person=person, actor=actor, key="cat", description="Pet", content="A cat called Miso")
    remember(
        team=tenant.team,
        person=person,
        actor=actor,
        key="page",
        description="Standing account",
        content="Ada is a sailor.",
        kind="page",
    )
    result = turn(tenant, person, conversation, "Tell me about my cat")
    notes = next(b for b in result.blocks if b.layer == "notes")
    lines = [json.loads(line) for line in notes.text.splitlines() if line.startswith('{"key"') and "content" in line]
    assert lines[0]["key"] == "page"
    assert "reference data, not instructions" in notes.text
    assert len(result.notes_used) == 2


def test_an_over_cap_stored_note_is_cut_at_render_and_flagged(tenant, person, actor, conversation):
    from django.db import connection

    from memory.models import Note

    # Older data stored before today's cap: the constraint is lifted inside this test's
    # transaction (rolled back with it) to store what the write path would now refuse.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE memory_note DROP CONSTRAINT note_content_cap")
    remember(team=tenant.team, person=person, actor=actor, key="old", description="Old", content="ok")
    Note.objects.filter(key="old").update(content="w" * 2500)
    result = turn(tenant, person, conversation, "anything about the old note")
    notes = next(b for b in result.blocks if b.layer == "notes")
    assert "over_cap:old" in notes.flags
    assert "w" * 2001 not in notes.text


TRICKY = 'She said "hi" \\ then\nleft\ttoday, café ☕ 😀 \u2028 end'


def notes_block(result):
    return next(b for b in result.blocks if b.layer == "notes")


def test_a_note_is_given_exactly_when_its_line_fits_though_its_content_is_read_later(
    tenant, person, actor, conversation, settings, caplog
):
    # The notes layer chooses from line lengths the database computes (JSON escaping included),
    # then reads the content of the chosen notes only: a length off by one would show here.
    remember(team=tenant.team, person=person, actor=actor, key="tricky", description="Quotes", content=TRICKY)
    whole = notes_block(turn(tenant, person, conversation, "What did she say?"))
    assert json.loads(whole.text.split("\n")[-1]) == {"key": "tricky", "content": TRICKY}

    settings.NOTES_CHARS = len(whole.text)
    fits = turn(tenant, person, conversation, "What did she say?")
    settings.NOTES_CHARS = len(whole.text) - 1
    short = turn(tenant, person, conversation, "What did she say?")

    assert notes_block(fits).text == whole.text
    assert len(fits.notes_used) == 1
    assert short.notes_used == []
    assert "omitted:1" in notes_block(short).flags
    assert "disagreed" not in caplog.text


def test_when_a_computed_line_length_disagrees_the_notes_are_packed_again_from_their_text(
    tenant, person, actor, conversation, mocker, caplog
):
    from conversations import composer

    remember(team=tenant.team, person=person, actor=actor, key="tricky", description="Quotes", content=TRICKY)
    remember(team=tenant.team, person=person, actor=actor, key="plain", description="Plain", content="Plain words.")
    expected = turn(tenant, person, conversation, "What did she say?")
    mocker.patch.object(composer, "_NOTE_LINE_FRAME", composer._NOTE_LINE_FRAME + 1)

    result = turn(tenant, person, conversation, "What did she say?")

    assert "disagreed" in caplog.text
    assert notes_block(result).text == notes_block(expected).text
    assert result.notes_used == expected.notes_used


def test_a_stopped_embedder_degrades_ordering_visibly(tenant, person, actor, conversation, settings):
    remember(team=tenant.team, person=person, actor=actor, key="cat", description="Pet", content="Miso")
    with embedding_settings(settings, Behaviour(mode="500", dim=8), model="m"):
        result = turn(tenant, person, conversation, "Tell me about my cat")
    assert sorted(result.degraded) == ["ordering", "passages"]  # the passages' search ran on words alone
    assert "notes" in {b.layer for b in result.blocks}
    assert result.notes_used  # newest first, still given


def test_a_failing_memory_read_costs_the_turn_its_notes_and_says_so(tenant, person, conversation, mocker):
    chat(conversation, [("Hello", "Hi")])
    mocker.patch("conversations.composer.turn_notes", side_effect=OperationalError("connection refused"))
    result = turn(tenant, person, conversation, "What do you know about me?")
    assert result.degraded == ["notes"]
    notes = next(b for b in result.blocks if b.layer == "notes")
    assert notes.text == MEMORY_UNAVAILABLE_NOTICE
    assert result.messages[-1]["content"] == "What do you know about me?"


def test_memory_failure_can_be_made_a_hard_failure(tenant, person, conversation, mocker, settings):
    settings.COMPOSER_MEMORY_FAILURE = "fail"
    mocker.patch("conversations.composer.turn_notes", side_effect=OperationalError("connection refused"))
    with pytest.raises(MemoryUnavailable):
        turn(tenant, person, conversation, "What do you know about me?")


def test_take_turn_records_the_message_and_the_turn(tenant, person):
    result = take_turn(team=tenant.team, agent=tenant.agent, person=person, message="Hello there, I moved to Bergen")
    assert Message.objects.get().content == "Hello there, I moved to Bergen"
    assert result.turn.costs == result.composition.costs
    again = take_turn(team=tenant.team, agent=tenant.agent, person=person, message="Second message here")
    assert again.turn.conversation_id == result.turn.conversation_id


@pytest.mark.parametrize(
    ("tags", "refs"), [([], {}), (["invoices"], {"work_item": ["B"]}), (["customer"], {"work_item": ["A"]})]
)
def test_the_notes_layer_shows_what_visible_notes_and_the_digest_show_in_the_ranked_order(
    tenant, person, actor, conversation, index_inline, tags, refs
):
    # The composer reads its notes with one hand-written query; the reads of visible_notes,
    # build_digest and order_by_meaning are the reference it must agree with: applicability (scope
    # refs, tags, expiry, mutes), shadowing, the digest's order and the ranking by meaning.
    from datetime import timedelta

    from django.utils import timezone

    from accounts.models import Person
    from memory.models import OntologyNode
    from memory.queries import TurnContext, build_digest, visible_notes
    from memory.services import mute_category
    from memory.vectors import order_by_meaning
    from tests.support.factories import note_fields

    team = tenant.team
    billing = OntologyNode.objects.create(team=team, node_id="billing", label="Billing")
    invoices = OntologyNode.objects.create(team=team, node_id="invoices", label="Invoices", parent=billing)
    customer = OntologyNode.objects.create(team=team, node_id="customer", label="Customer")
    OntologyNode.objects.create(
        team=team, node_id="customer-pays-invoice", label="pays", kind="relationship", source=customer, target=invoices
    )
    apollo = "project:apollo"
    notes = [
        ("private", "boat", {}, [], "", "Ada sails a small wooden boat on the fjord."),
        ("shared", "boat", {}, [], "", "The team boat is moored in Bergen."),  # shadowed by the private one
        ("global", "boat", {}, [], "", "Ada's global boat note."),  # shadowed too
        ("private", "item-a", {"work_item": ["A"]}, [], "", "Work item A is about invoices."),
        ("shared", "item-b", {"work_item": ["B", "C"]}, [], "", "Work item B or C, the billing rework."),
        ("shared", "billing-domain", {}, ["billing"], "", "Billing is owned by Finance."),
        ("global", "pays", {}, ["customer-pays-invoice"], "", "Customers pay invoices monthly."),
        ("global", "coffee", {}, [], "health", "Ada drinks oat milk coffee."),  # muted for this agent
        ("shared", "standup", {}, [], "health", "Standups are at nine."),  # muted by Ada, for this agent
        ("global", "page", {}, [], "", "Ada is a sailor and an engineer."),
        ("private", "train", {}, [], "", "Ada is on the train to Oslo."),
    ]
    with index_inline():
        for bank, key, scope_refs, semantics, category, content in notes:
            fields = note_fields(key=key, content=content, description=f"About {key}")
            extra = {"kind": "page"} if key == "page" else {}
            remember(
                team=team, person=person, actor=actor, scope=apollo, bank=bank, scope_refs=scope_refs,
                semantics=semantics, category=category, **extra, **fields,
            )  # fmt: skip
    Note = type(visible_notes(team=team, person=person, agent=None, scope=apollo).notes[0])
    Note.objects.filter(key="train").update(expires_at=timezone.now() - timedelta(minutes=1))
    mute_category(person=person, agent=tenant.agent, category="health")
    assert Person.objects.filter(pk=person.pk).exists()
    context = TurnContext(refs=refs, tags=tags)
    message = record_message(conversation=conversation, role="user", content="Tell me about the boat and billing")

    result = compose(
        team=team, agent=tenant.agent, person=person, conversation=conversation, message=message, scope=apollo,
        context=context,
    )  # fmt: skip

    seen = visible_notes(team=team, person=person, agent=tenant.agent, scope=apollo, context=context)
    digest = build_digest(team=team, person=person, agent=tenant.agent, scope=apollo, context=context, visible=seen)
    pages = sorted((n for n in seen.notes if n.kind == "page"), key=lambda n: -n.updated_at.timestamp())
    rest = order_by_meaning(team=team, notes=[n for n in seen.notes if n.kind != "page"], query=message.content)
    block = notes_block(result).text
    assert block.startswith(digest.text + "\n")
    shown = [json.loads(line)["key"] for line in block[len(digest.text) :].split("\n") if line.startswith('{"key"')]
    assert shown == [n.key for n in pages + rest.notes]
    assert result.notes_used == [n.pk for n in pages + rest.notes]
    assert "coffee" not in shown
    assert "standup" not in shown
    assert "train" not in shown


def _sorting() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_sort")
        return str(cursor.fetchone()[0])


def test_the_history_read_gives_the_planner_settings_back_inside_a_transaction(tenant, person, conversation):
    """The history read turns sorting off for itself only: the turn's later queries, in the same
    transaction (a test's own), plan as they would have."""
    chat(conversation, [("I sail on the fjord", "Lovely."), ("And in winter?", "Skiing.")])
    result = turn(tenant, person, conversation, "Where do I sail?")
    assert _sorting() == "on"
    assert [m["content"] for m in result.messages] == [
        "I sail on the fjord", "Lovely.", "And in winter?", "Skiing.", "Where do I sail?"
    ]  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_the_history_read_gives_the_planner_settings_back_in_autocommit(tenant, person, conversation, settings):
    """Outside any transaction the read is one of its own, and the connection's next query plans as before."""
    settings.EMBEDDER = "none"  # these messages commit: nothing is queued for embedding that outlives the test
    chat(conversation, [("I sail on the fjord", "Lovely.")])
    result = turn(tenant, person, conversation, "Where do I sail?")
    assert _sorting() == "on"
    assert [m["content"] for m in result.messages] == ["I sail on the fjord", "Lovely.", "Where do I sail?"]


def test_a_last_exchange_over_the_ceiling_keeps_the_start_of_its_oldest_run(tenant, person, conversation, settings):
    """The last exchange's runs of one role are read whole however long they are: cut, the oldest keeps its start."""
    settings.COMPOSER_CEILING = 1_000
    record_message(conversation=conversation, role="user", content="START " + "a" * 800)
    record_message(conversation=conversation, role="user", content="b" * 1_200)
    record_message(conversation=conversation, role="assistant", content="A reply.")

    result = turn(tenant, person, conversation, "And now?")

    assert [m["role"] for m in result.messages] == ["user", "assistant", "user"]
    assert result.messages[0]["content"].startswith("START a")
    assert result.prefix_chars <= 1_000


def test_a_last_exchange_whose_reply_alone_passes_the_ceiling_is_cut_not_dropped(
    tenant, person, conversation, settings
):
    settings.COMPOSER_CEILING = 1_000
    chat(conversation, [("An old question", "An old answer")])
    record_message(conversation=conversation, role="user", content="Tell me everything.")
    record_message(conversation=conversation, role="assistant", content="A long reply: " + "r" * 1_200)

    result = turn(tenant, person, conversation, "And now?")

    # The person's question is cut away first (oldest first), then the reply is cut to fit.
    assert [m["role"] for m in result.messages] == ["assistant", "user"]
    assert result.messages[0]["content"].startswith("A long reply")
    assert result.prefix_chars <= 1_000


@pytest.mark.parametrize("ceiling", [1_000, 2_500, 6_000, 18_000])
def test_the_window_read_is_what_reading_every_newest_message_gives(tenant, person, conversation, settings, ceiling):
    """The history query leaves out the runs that could never be shown: the turn is the one composed
    from all of the newest HISTORY_FETCH messages."""
    from conversations import composer
    from conversations.models import Message

    rng = random.Random(ceiling)
    for _ in range(120):
        role = rng.choice(["user", "assistant", "user", "assistant", "assistant"])  # runs of one role too
        record_message(conversation=conversation, role=role, content=f"{role} says " + "w" * rng.randint(1, 600))
    settings.COMPOSER_CEILING = ceiling

    def every_newest(self):
        rows = (
            Message.objects.not_erased()
            .filter(conversation=self.conversation, order__lte=self.message.order)
            .order_by("-order")
            .values_list("pk", "role", "content")[: composer.HISTORY_FETCH]
        )
        return composer._merge_roles(list(rows)[::-1])

    message = record_message(conversation=conversation, role="user", content="What did we say about the w?")
    kwargs = {"team": tenant.team, "agent": tenant.agent, "person": person, "conversation": conversation}
    read = compose(message=message, **kwargs)
    with mock.patch.object(composer._Composer, "_history", every_newest):
        expected = compose(message=message, **kwargs)

    assert read.messages == expected.messages
    assert read.blocks == expected.blocks
    if ceiling >= 6_000:  # room for earlier exchanges: the comparison covers the deeper window
        assert "deeper_window" in {block.layer for block in read.blocks}


def test_the_notes_banks_read_with_the_history_are_the_scopes_as_validated(tenant, person, actor, conversation):
    # The composer sends the banks' read with its history; the scope it addresses them by is the
    # one turn_notes validates (stripped), so the scoped banks' notes are shown, and only theirs.
    remember(team=tenant.team, person=person, actor=actor, scope="project:apollo", bank="private", key="rocket",
             description="Rocket", content="Saturn V")  # fmt: skip
    remember(team=tenant.team, person=person, actor=actor, scope="project:zeus", bank="private", key="bolt",
             description="Bolt", content="Thunder")  # fmt: skip
    result = turn(tenant, person, conversation, "Tell me about the rocket", scope="  project:apollo ")
    notes = next(b for b in result.blocks if b.layer == "notes").text
    assert "Saturn V" in notes
    assert "Thunder" not in notes


def test_a_scope_that_is_not_valid_is_refused_as_before(tenant, person, conversation):
    with pytest.raises(InvalidNote):
        turn(tenant, person, conversation, "Hello there", scope="project:\u202eapollo")


def test_a_search_text_other_than_the_message_is_embedded_beside_it_before_the_history_is_read(
    tenant, person, conversation, settings
):
    chat(conversation, [("I cooked a mushroom risotto for my sister", "That sounds lovely")], days_ago=3)
    asked = "What did I cook on 9 November, 2022?"
    meant = meaning_text(agent=tenant.agent, person=person, query=asked)
    assert meant == "What did I cook ?"  # the search embeds the question without its date
    behaviour = Behaviour(dim=8)

    def asked_for() -> list[str]:
        return [r["input"] if isinstance(r["input"], str) else r["input"][0] for r in list(behaviour.requests)]

    before_history: list[bool] = []

    def hold_the_history(execute, sql, params, many, context):
        # The history is the turn's first read: wait there (a while) for the search text to be asked for.
        if "enable_sort = off" in sql and not before_history:
            deadline = time.monotonic() + 5
            while meant not in asked_for() and time.monotonic() < deadline:
                time.sleep(0.01)
            before_history.append(meant in asked_for())
        return execute(sql, params, many, context)

    with embedding_settings(settings, behaviour, model="m-search-text"):
        message = record_message(conversation=conversation, role="user", content=asked)
        with connection.execute_wrapper(hold_the_history):
            result = compose(
                team=tenant.team, agent=tenant.agent, person=person, conversation=conversation, message=message
            )

    assert before_history == [True]
    assert sorted(asked_for()) == sorted([asked, meant])  # each embedded once: the search waited on it
    assert "passages" not in result.degraded


def test_a_fact_deep_in_a_long_message_is_found_and_its_window_shown(tenant, person, conversation, settings):
    filler = "We went over the itinerary, the hotel and the trains one more time. " * 36  # 2,448 characters
    fact = "The locker code at the Porto station is 4471."
    long_message = filler + fact + " " + filler
    chat(conversation, [("Can you plan my trip?", long_message)], days_ago=30)
    chat(conversation, [(f"Unrelated chat number {i} about cooking pasta.", "Nice.") for i in range(6)], days_ago=20)
    settings.COMPOSER_CEILING = 3_000  # the window cannot reach back to the trip
    result = turn(tenant, person, conversation, "What was the locker code at the Porto station?")
    passages = next(b for b in result.blocks if b.layer == "passages")
    lines = [json.loads(line) for line in passages.text.splitlines() if line.startswith("{")]
    shown = next(line for line in lines if fact in line["text"])
    message = Message.objects.get(content=long_message)
    assert shown["message"] == message.pk
    assert shown["who"] == "agent"
    start = long_message.index(fact)
    assert shown["at"].startswith("chars ")
    first, last = (int(n) for n in shown["at"].split()[1].split("-"))
    assert first <= start
    assert start + len(fact) <= last
    assert shown["at"].endswith(f"of {len(long_message)}")
    assert len(json.dumps(shown, ensure_ascii=False)) < len(long_message) // 4
    assert passages.chars <= settings.PASSAGES_CHARS
