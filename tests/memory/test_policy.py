"""The bounded bank's policy as pure functions: no database, no model, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.policy import (
    HALF_LIFE_HOURS,
    Candidate,
    decay_factor,
    judge_newcomer,
    repetition_boost,
    weakest,
    worth,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
CAPACITY = 8


def aged(key: str, kind: str, *, hours: float = 0, days: float = 0, repetitions: int = 1) -> Candidate:
    return Candidate(key, kind, NOW - timedelta(days=days, hours=hours), repetitions)


def full_bank_of_names(extra: Candidate, size: int = CAPACITY) -> list[Candidate]:
    """`extra` plus never-decaying identity notes up to `size`, so `extra` is the obvious weakest."""
    names = [aged(f"name-{i}", "identity", days=400 + i) for i in range(size - 1)]
    return [*names, extra]


# --- corrections are not the policy's business ----------------------------------------------


def test_judge_newcomer_judges_by_worth_not_by_key_so_corrections_must_never_reach_it():
    # judge_newcomer is only about net-new notes: it does not look at keys, so a newcomer whose
    # key is already held is judged (and would evict) like any other. The write path must send a
    # correction by key to the update branch before consulting the policy.
    held = full_bank_of_names(aged("allergy", "fact", days=30))
    same_key = judge_newcomer(Candidate("allergy", "identity", NOW), held, CAPACITY, NOW)
    other_key = judge_newcomer(Candidate("full-name", "identity", NOW), held, CAPACITY, NOW)
    assert same_key == other_key
    assert same_key.admit is True
    assert same_key.evict is not None
    assert same_key.evict.key == "allergy"


def test_judge_newcomer_below_capacity_admits_even_a_key_already_held():
    held = [aged("allergy", "fact", days=30)]
    verdict = judge_newcomer(Candidate("allergy", "fact", NOW), held, CAPACITY, NOW)
    assert verdict.admit is True
    assert verdict.evict is None


# --- eviction before the write --------------------------------------------------------------


def test_admitting_at_capacity_names_the_note_to_evict_before_the_write():
    loser = aged("lunch-today", "ephemeral", hours=1)
    held = full_bank_of_names(loser)
    newcomer = Candidate("home-city", "fact", NOW)
    verdict = judge_newcomer(newcomer, held, CAPACITY, NOW)
    assert verdict.admit is True
    assert verdict.evict == loser
    assert verdict.newcomer_worth == pytest.approx(worth(newcomer, NOW))
    assert verdict.weakest_worth == pytest.approx(worth(loser, NOW))
    assert verdict.newcomer_worth > verdict.weakest_worth


def test_refusal_evicts_nothing():
    held = full_bank_of_names(aged("allergy", "fact", days=30))
    verdict = judge_newcomer(Candidate("on-the-train", "ephemeral", NOW), held, CAPACITY, NOW)
    assert verdict.admit is False
    assert verdict.evict is None


# --- names outlast sandwiches ---------------------------------------------------------------


@pytest.mark.parametrize("sandwich_kind", ["preference", "fact"])
def test_year_old_name_outweighs_fresh_sandwich(sandwich_kind):
    name = aged("name", "identity", days=365)
    sandwich = aged("favourite-sandwich", sandwich_kind)
    assert worth(name, NOW) > worth(sandwich, NOW)
    assert weakest([name, sandwich], NOW) == sandwich


@pytest.mark.parametrize("sandwich_kind", ["preference", "fact"])
def test_fresh_sandwich_is_refused_by_a_bank_of_year_old_names(sandwich_kind):
    held = [aged(f"name-{i}", "identity", days=365) for i in range(CAPACITY)]
    verdict = judge_newcomer(Candidate("favourite-sandwich", sandwich_kind, NOW), held, CAPACITY, NOW)
    assert verdict.admit is False
    assert verdict.evict is None


@pytest.mark.parametrize("sandwich_kind", ["preference", "fact"])
def test_fresh_sandwich_gives_way_to_a_name(sandwich_kind):
    sandwich = aged("favourite-sandwich", sandwich_kind)
    held = full_bank_of_names(sandwich)
    verdict = judge_newcomer(Candidate("name", "identity", NOW), held, CAPACITY, NOW)
    assert verdict.admit is True
    assert verdict.evict == sandwich


@pytest.mark.parametrize("sandwich_kind", ["ephemeral", "preference", "fact"])
@pytest.mark.parametrize("repetitions", [2, 9, 50, 10_000])
def test_repetition_does_not_lift_a_sandwich_above_a_year_old_name(sandwich_kind, repetitions):
    name = aged("name", "identity", days=365)
    sandwich = aged("favourite-sandwich", sandwich_kind, repetitions=repetitions)
    assert worth(sandwich, NOW) < worth(name, NOW)
    assert weakest([name, sandwich], NOW) == sandwich
    held = full_bank_of_names(sandwich)
    verdict = judge_newcomer(Candidate("name-again", "identity", NOW - timedelta(days=365)), held, CAPACITY, NOW)
    assert verdict.evict == sandwich


def test_repetition_boost_is_bounded():
    assert repetition_boost(1) == 1.0
    assert repetition_boost(2) == pytest.approx(1.25)
    assert repetition_boost(0) == 1.0  # never below one mention
    assert repetition_boost(10_000) == repetition_boost(9) == pytest.approx(3.0)


def test_repetition_raises_worth_within_a_kind():
    once = aged("coffee", "preference", days=10)
    often = aged("coffee", "preference", days=10, repetitions=5)
    assert worth(often, NOW) == pytest.approx(2 * worth(once, NOW))


# --- the train journey and the allergy ------------------------------------------------------


def test_train_journey_is_refused_rather_than_pushing_out_an_allergy():
    allergy = aged("peanut-allergy", "fact", days=30)
    held = full_bank_of_names(allergy)
    assert weakest(held, NOW) == allergy
    verdict = judge_newcomer(Candidate("on-the-train", "ephemeral", NOW), held, CAPACITY, NOW)
    assert verdict.admit is False
    assert verdict.evict is None
    assert verdict.weakest_worth == pytest.approx(worth(allergy, NOW))


def test_repeated_train_journey_is_still_refused_against_a_season_old_allergy():
    held = full_bank_of_names(aged("peanut-allergy", "fact", days=90))
    newcomer = Candidate("on-the-train", "ephemeral", NOW, repetitions=10_000)
    assert judge_newcomer(newcomer, held, CAPACITY, NOW).admit is False


def test_train_journey_gives_way_to_an_allergy():
    train = aged("on-the-train", "ephemeral", hours=1)
    held = full_bank_of_names(train)
    verdict = judge_newcomer(Candidate("peanut-allergy", "fact", NOW), held, CAPACITY, NOW)
    assert verdict.admit is True
    assert verdict.evict == train


# --- decay ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "half_life"),
    [("preference", timedelta(days=180)), ("fact", timedelta(days=90)), ("ephemeral", timedelta(hours=2))],
)
def test_worth_halves_at_each_half_life(kind, half_life):
    assert HALF_LIFE_HOURS[kind] == pytest.approx(half_life / timedelta(hours=1))
    fresh = worth(Candidate("n", kind, NOW), NOW)
    one = worth(Candidate("n", kind, NOW - half_life), NOW)
    two = worth(Candidate("n", kind, NOW - 2 * half_life), NOW)
    assert fresh > 0
    assert one == pytest.approx(fresh / 2)
    assert two == pytest.approx(fresh / 4)


@pytest.mark.parametrize(("kind", "hours"), [("preference", 180 * 24), ("fact", 90 * 24), ("ephemeral", 2)])
def test_decay_factor_at_half_lives(kind, hours):
    assert decay_factor(kind, 0) == 1.0
    assert decay_factor(kind, hours) == pytest.approx(0.5)
    assert decay_factor(kind, 2 * hours) == pytest.approx(0.25)
    assert decay_factor(kind, hours / 2) == pytest.approx(2**-0.5)


@pytest.mark.parametrize("kind", ["identity", "page"])
def test_never_decaying_kinds_keep_full_worth_after_years(kind):
    assert HALF_LIFE_HOURS[kind] is None
    fresh = worth(Candidate("n", kind, NOW), NOW)
    for years in (1, 5, 10, 30):
        old = Candidate("n", kind, NOW - timedelta(days=365 * years))
        assert decay_factor(kind, years * 365 * 24.0) == 1.0
        assert worth(old, NOW) == fresh


def test_a_note_dated_in_the_future_is_worth_no_more_than_fresh():
    future = Candidate("n", "fact", NOW + timedelta(days=30))
    assert worth(future, NOW) == pytest.approx(worth(Candidate("n", "fact", NOW), NOW))


def test_older_note_of_a_decaying_kind_is_worth_less():
    assert worth(aged("a", "fact", days=10), NOW) > worth(aged("a", "fact", days=11), NOW)


# --- ties, room below capacity, determinism -------------------------------------------------


def test_tie_keeps_what_is_already_there():
    incumbent = aged("coffee", "preference")
    held = full_bank_of_names(incumbent)
    newcomer = Candidate("tea", "preference", NOW)  # same kind, same age: equal worth
    verdict = judge_newcomer(newcomer, held, CAPACITY, NOW)
    assert verdict.newcomer_worth == verdict.weakest_worth
    assert verdict.admit is False
    assert verdict.evict is None


def test_tie_between_never_decaying_notes_keeps_what_is_already_there():
    held = [aged(f"name-{i}", "identity", days=i) for i in range(CAPACITY)]
    verdict = judge_newcomer(Candidate("nickname", "identity", NOW), held, CAPACITY, NOW)
    assert verdict.admit is False


@pytest.mark.parametrize("held_count", [0, 1, CAPACITY - 1])
def test_below_capacity_everything_is_admitted_without_eviction(held_count):
    held = [aged(f"name-{i}", "identity", days=1) for i in range(held_count)]
    newcomer = Candidate("on-the-train", "ephemeral", NOW - timedelta(days=30))  # nearly worthless
    verdict = judge_newcomer(newcomer, held, CAPACITY, NOW)
    assert verdict.admit is True
    assert verdict.evict is None
    assert verdict.weakest_worth is None


def test_capacity_one():
    held = [aged("coffee", "preference", days=1)]
    assert judge_newcomer(Candidate("name", "identity", NOW), held, 1, NOW).evict == held[0]
    assert judge_newcomer(Candidate("train", "ephemeral", NOW), held, 1, NOW).admit is False


def test_weakest_breaks_worth_ties_by_oldest_then_key():
    same_age = [aged(k, "identity", days=3) for k in ("charlie", "alpha", "bravo")]
    older = aged("zulu", "identity", days=4)
    assert weakest([*same_age, older], NOW) == older  # equal worth: the oldest gives way
    assert weakest(same_age, NOW).key == "alpha"  # equal worth and age: by key


def test_weakest_does_not_depend_on_order():
    held = [
        aged("name", "identity", days=365),
        aged("coffee", "preference", days=3),
        aged("allergy", "fact", days=30),
        aged("train", "ephemeral", hours=1),
        aged("tea", "preference", days=3),
    ]
    expected = weakest(held, NOW)
    assert expected.key == "train"
    assert weakest(list(reversed(held)), NOW) == expected
    assert weakest(sorted(held, key=lambda c: c.key), NOW) == expected


def test_weakest_picks_lowest_worth_over_oldest():
    old_name = aged("name", "identity", days=3650)
    fresh_train = aged("train", "ephemeral")
    assert weakest([old_name, fresh_train], NOW) == fresh_train


def test_every_note_kind_has_a_half_life_entry():
    from memory.models import Note

    assert set(HALF_LIFE_HOURS) == set(Note.Kind.values)


def test_below_capacity_the_verdict_still_carries_the_newcomers_worth():
    newcomer = aged("tea", "preference", days=1)
    verdict = judge_newcomer(newcomer, [], CAPACITY, NOW)
    assert verdict.admit
    assert verdict.newcomer_worth == worth(newcomer, NOW)
    assert verdict.weakest_worth is None
