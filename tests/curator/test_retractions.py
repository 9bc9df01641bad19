"""What the person takes back, end to end: a fact is curated, retracted, and the next pass removes
or updates the note that said it, through the write path and attributably (actor and reason)."""

from __future__ import annotations

import pytest

from conversations.models import Message
from conversations.services import erase_message
from curator.providers import CURATE_SYSTEM, ScriptedProvider
from curator.schemas import CuratorPlan, EditOp, ForgetOp, RememberOp
from curator.services import curate_conversation
from memory.models import Note, Revision
from memory.services import append_observation, mute_category
from tests.support.factories import chat

pytestmark = pytest.mark.django_db


def said(conversation, text: str, reply: str = "I see.") -> Message:
    """The person says it, the agent answers, and the curator passes over the exchange."""
    message = chat(conversation, [(text, reply)])[0]
    curate_conversation(conversation_id=conversation.pk, task_id="pass")
    return message


def notes() -> dict[str, str]:
    return dict(Note.objects.values_list("key", "content"))


@pytest.mark.parametrize(
    ("fact", "retraction", "key", "topic"),
    [
        ("I'm vegetarian.", "I'm not vegetarian anymore.", "diet", "diet"),
        ("I'm vegan.", "Funny thing: I eat meat again!", "diet", "diet"),
        ("I'm a vegetarian.", "I stopped being a vegetarian last spring.", "diet", "diet"),
        ("I love running.", "I stopped running.", "preference-running", "habit"),
        ("I enjoy swimming.", "I don't swim anymore.", "preference-swimming", "habit"),
        ("I like sushi.", "I don't like sushi anymore.", "preference-sushi", "liking"),
        ("I love jazz.", "I no longer love jazz.", "preference-jazz", "liking"),
        ("I hate mornings.", "I don't mind mornings anymore.", "preference-mornings", "liking"),
        ("I live in Oslo.", "I moved out of Oslo.", "home-city", "home"),
        ("I live in Oslo.", "I don't live in Oslo anymore.", "home-city", "home"),
        ("I'm allergic to peanuts.", "I'm not allergic to peanuts after all.", "allergy-peanuts", "allergy"),
        ("I'm allergic to shellfish.", "I'm no longer allergic to shellfish.", "allergy-shellfish", "allergy"),
    ],
)
def test_a_retraction_forgets_the_note_that_held_only_that_fact(
    tenant, person, conversation, fact, retraction, key, topic
):
    said(conversation, fact)
    assert key in notes()
    message = said(conversation, retraction)
    assert key not in notes()
    removal = Revision.objects.get(note_key=key, action="delete")
    assert (removal.actor, removal.actor_ref, removal.request_id) == ("curator", "rules:rules-v1", "pass")
    assert removal.reason == f"taken back by the person in message {message.pk} ({topic})"
    assert removal.before is not None


def test_the_reason_keeps_no_copy_of_the_words_an_erasure_takes(tenant, person, conversation):
    said(conversation, "I'm vegetarian.")
    message = said(conversation, "Since the trip to Zanzibar I'm not vegetarian anymore.")
    assert "diet" not in notes()
    erase_message(message=message)
    assert not Revision.objects.filter(reason__contains="Zanzibar").exists()


@pytest.mark.parametrize(
    ("retraction", "employer", "taken_back"),
    [
        ("I no longer work at Acme Corp.", "Left Acme Corp; no current employer known.", " (employer)"),
        ("I don't work at Acme anymore.", "Left Acme Corp; no current employer known.", " (employer)"),
        ("I quit my job at Acme Corp.", "Left Acme Corp; no current employer known.", " (employer)"),
        ("I quit my job.", "Left Acme Corp; no current employer known.", " (employer)"),
        ("I was laid off.", "Left Acme Corp; no current employer known.", " (employer)"),
        ("I left Acme and now work at Globex.", "Works at Globex.", " (employer)"),
        ("I'm now working at Globex.", "Works at Globex.", ""),  # a correction, nothing taken back
    ],
)
def test_leaving_a_job_updates_the_employer_with_the_reason(
    tenant, person, conversation, retraction, employer, taken_back
):
    said(conversation, "I work at Acme Corp.")
    message = said(conversation, retraction)
    assert notes()["employer"] == employer
    update = Revision.objects.get(note_key="employer", action="update")
    assert update.actor == "curator"
    assert update.before["content"] == "Works at Acme Corp."
    assert update.after["content"] == employer
    assert update.reason == f"changed by the person in message {message.pk}{taken_back}"


def test_what_was_taken_back_leaves_the_summary_the_rules_wrote(tenant, person, conversation):
    said(conversation, "I'm vegetarian. I live in Oslo. I love running.")
    conversation.refresh_from_db()
    assert "Is vegetarian." in conversation.summary
    said(conversation, "I'm not vegetarian anymore. I moved to Bergen. I stopped running.")
    conversation.refresh_from_db()
    assert conversation.summary == "Lives in Bergen (moved there)."


def test_leaving_the_city_one_lives_in_is_no_job_left_and_no_move(tenant, person, conversation):
    said(conversation, "I live in Oslo.")
    said(conversation, "I left Oslo on Friday.")
    assert notes() == {"home-city": "Lives in Oslo."}  # a trip, maybe: nothing is taken back or made up


def test_leaving_another_job_than_the_one_remembered_changes_nothing(tenant, person, conversation):
    said(conversation, "I work at Acme Corp.")
    said(conversation, "I left Initech years ago, before Acme.")
    assert notes()["employer"] == "Works at Acme Corp."
    assert not Revision.objects.filter(action__in=["update", "delete"]).exists()


def test_a_retraction_with_the_new_value_updates_the_note(tenant, person, conversation):
    said(conversation, "I'm vegetarian. I live in Oslo.")
    message = said(conversation, "I'm no longer vegetarian, I'm vegan now. And I moved from Oslo to Bergen.")
    assert notes()["diet"] == "Is vegan."
    assert notes()["home-city"] == "Lives in Bergen (moved there)."
    diet = Revision.objects.get(note_key="diet", action="update")
    assert diet.before["content"] == "Is vegetarian."
    assert diet.reason == f"changed by the person in message {message.pk} (diet)"
    home = Revision.objects.get(note_key="home-city", action="update")
    assert home.reason == f"changed by the person in message {message.pk} (home)"
    assert not Revision.objects.filter(action="delete").exists()


def test_a_retraction_edits_the_line_out_of_a_note_that_holds_several(tenant, person, conversation, actor):
    for line in ["Runs every morning.", "Plays chess on Sundays.", "Smokes after dinner."]:
        append_observation(team=tenant.team, person=person, actor=actor, category="hobbies", observation=line)
    running = said(conversation, "I don't run anymore, my knee is done.")
    assert notes()["hobbies"] == "Plays chess on Sundays.\nSmokes after dinner."
    smoking = said(conversation, "I gave up smoking in the spring.")
    assert notes()["hobbies"] == "Plays chess on Sundays."
    first, second = Revision.objects.filter(note_key="hobbies", action="update").order_by("id")
    assert first.actor == second.actor == "curator"
    assert first.before["content"] == "Runs every morning.\nPlays chess on Sundays.\nSmokes after dinner."
    assert first.reason == f"taken back by the person in message {running.pk} (habit)"
    assert second.reason == f"taken back by the person in message {smoking.pk} (habit)"
    chess = said(conversation, "I stopped playing chess.")
    assert "hobbies" not in notes()  # its last line taken back: the note goes
    removal = Revision.objects.get(note_key="hobbies", action="delete")
    assert removal.reason == f"taken back by the person in message {chess.pk} (habit)"


def test_a_line_about_someone_else_or_saying_more_is_left_alone(tenant, person, conversation, actor):
    for line in ["Sister is vegetarian.", "Is vegetarian and runs marathons.", "Is vegetarian."]:
        append_observation(team=tenant.team, person=person, actor=actor, category="about", observation=line)
    said(conversation, "I'm not vegetarian anymore.")
    assert notes()["about"] == "Sister is vegetarian.\nIs vegetarian and runs marathons."


@pytest.mark.parametrize(
    "not_a_retraction",
    [
        "Do you think I should stop running?",
        "Should I quit my job at Acme Corp?",
        "If I stopped running, would I lose my fitness?",
        "I wonder whether I'm not vegetarian anymore in spirit.",
        "My sister stopped running.",
        "My brother isn't vegetarian anymore.",
        "She says I'm not vegetarian anymore, which is nonsense.",
        "I stopped running for a week because of my knee.",
        "I'm not running anymore this week, doctor's orders.",
        "I'd never quit my job at Acme Corp.",
        "I'm not allergic to peanuts, my brother is.",
        "I haven't stopped running.",
        "I left Initech.",
        "I left Oslo this morning.",
        "I don't like rainy days anymore.",
    ],
)
def test_questions_hypotheticals_others_and_passing_pauses_retract_nothing(
    tenant, person, conversation, not_a_retraction
):
    said(conversation, "I'm vegetarian. I love running. I work at Acme Corp. I'm allergic to peanuts. I live in Oslo.")
    before = notes()
    said(conversation, not_a_retraction)
    assert notes() == before
    assert not Revision.objects.filter(action__in=["update", "delete"]).exists()


def test_the_agent_saying_it_retracts_nothing(tenant, person, conversation):
    said(conversation, "I'm vegetarian. I love running.")
    said(conversation, "Thanks!", reply="I'm not vegetarian anymore, and I stopped running years ago.")
    assert set(notes()) == {"diet", "preference-running"}
    assert not Revision.objects.filter(action__in=["update", "delete"]).exists()


def test_a_retraction_of_something_never_remembered_writes_nothing(tenant, person, conversation):
    said(conversation, "I'm not vegetarian anymore. I stopped running. I quit my job.")
    assert not Note.objects.exclude(kind="daily").exists()
    assert not Revision.objects.exists()


def test_the_pass_gives_the_provider_the_notes_it_may_see_with_their_content(tenant, person, conversation, actor):
    append_observation(team=tenant.team, person=person, actor=actor, category="hobbies", observation="Runs daily.")
    append_observation(team=tenant.team, person=person, actor=actor, category="health", observation="Is vegan.")
    mute_category(person=person, agent=tenant.agent, category="health")
    provider = ScriptedProvider()
    chat(conversation, [("Hello", "Hi")])
    curate_conversation(conversation_id=conversation.pk, provider=provider)
    [request] = provider.seen
    assert [(n.key, n.content) for n in request.notes] == [("hobbies", "Runs daily.")]  # muted for this agent


def test_a_model_plan_retracts_through_forget_edit_and_remember_with_reasons(tenant, person, conversation, actor):
    said(conversation, "I'm vegetarian. I work at Acme Corp.")
    append_observation(team=tenant.team, person=person, actor=actor, category="hobbies", observation="Runs daily.")
    append_observation(team=tenant.team, person=person, actor=actor, category="hobbies", observation="Plays chess.")
    said_now = chat(conversation, [("Big changes: meat again, no running, and I work at Globex.", "Oh!")])
    retraction = said_now[0]
    plan = CuratorPlan(
        operations=[
            ForgetOp(op="forget", key="diet", reason="they eat meat again"),
            EditOp(
                op="edit",
                key="hobbies",
                find="Runs daily.\n",
                content="",
                reason="they stopped running",
                sources=[retraction.pk],
            ),
            RememberOp(
                op="remember",
                key="employer",
                description="Where the person works",
                content="Works at Globex.",
                reason="they moved to Globex",
            ),
        ]
    )
    outcome = curate_conversation(conversation_id=conversation.pk, provider=ScriptedProvider(curations=[plan]))
    assert "applied 3 operation(s)" in outcome
    assert notes() == {"hobbies": "Plays chess.", "employer": "Works at Globex."}
    reasons = {
        r.note_key: (r.action, r.actor, r.actor_ref, r.reason)
        for r in Revision.objects.filter(actor_ref="scripted:scripted")
    }
    assert reasons == {
        "diet": ("delete", "curator", "scripted:scripted", "they eat meat again"),
        "hobbies": ("update", "curator", "scripted:scripted", "they stopped running"),
        "employer": ("update", "curator", "scripted:scripted", "they moved to Globex"),
    }


def test_a_model_edit_of_text_the_note_does_not_hold_is_refused_and_changes_nothing(tenant, person, conversation):
    said(conversation, "I love running.")
    plan = CuratorPlan(
        operations=[EditOp(op="edit", key="preference-running", find="Runs daily.", content="", reason="stopped")]
    )
    chat(conversation, [("I stopped running", "Ok")])
    outcome = curate_conversation(conversation_id=conversation.pk, provider=ScriptedProvider(curations=[plan]))
    assert "refused 1: edit preference-running" in outcome
    assert notes()["preference-running"] == "Likes running."
    assert Revision.objects.filter(note_key="preference-running", action="refused", actor="curator").exists()


def test_the_model_is_told_that_retractions_update_or_remove_the_note():
    assert "retracts or changes something remembered" in CURATE_SYSTEM
    assert "forget" in CURATE_SYSTEM
    assert CuratorPlan.model_json_schema()["$defs"]["EditOp"]["properties"]["op"]["const"] == "edit"
