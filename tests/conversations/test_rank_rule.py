"""The conversation search's ranking (conversations.queries._rank, in numpy) against its rule
written plainly: a dict per score and a lookup per neighbour, as rank_candidates' docstring reads.
Both must give the same order and the very same scores, for every ranking the benchmark measures."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from django.conf import settings

from conversations.dates import NamedDate
from conversations.queries import (
    DATE_SHARE,
    DATE_SLACK_DAYS,
    DEFAULT_RANKING,
    RANKING_CHANGES,
    Ranking,
    _microseconds,
    _rank,
)
from conversations.retrieval import Found, Row

RANKINGS = {"default": DEFAULT_RANKING, **RANKING_CHANGES}
DAY = 86_400_000_000  # microseconds
START = datetime(2023, 5, 1, tzinfo=UTC)


def plain_rule(
    keyword: list[Row], similar: list[Row], *, named: dict[str, str], dates: list[NamedDate], ranking: Ranking
) -> tuple[list[int], dict[int, float]]:
    found: dict[int, Row] = {}
    own: dict[int, float] = {}
    best = max((row[6] for row in keyword), default=0.0)
    for row in keyword:
        found[row[0]] = row
        own[row[0]] = row[6] / best if best > 0 else 0.0
    floor = settings.VECTOR_FLOOR
    for row in similar:
        found.setdefault(row[0], row)
        own[row[0]] = own.get(row[0], 0.0) + ranking.meaning_weight * (row[6] - floor) / (1.0 - floor)
    named_roles = set(named.values())
    one_side = len(named_roles) == 1
    if one_side and not ranking.speaker_share_of_total:
        for pk, row in found.items():
            if row[4] not in named_roles:
                own[pk] *= ranking.other_speaker_share
    if dates:
        windows = [
            (_microseconds(a), _microseconds(b)) for a, b in (d.window(slack_days=DATE_SLACK_DAYS) for d in dates)
        ]
        outside = [pk for pk, row in found.items() if not any(a <= row[3] < b for a, b in windows)]
        if len(outside) < len(found):
            for pk in outside:
                own[pk] *= DATE_SHARE
    # A long message gives its neighbours less of its own score.
    up_to = ranking.neighbours_give_up_to
    placed = {
        (row[1], row[2]): own[pk] * min(1.0, up_to / max(row[5], 1)) if up_to else own[pk] for pk, row in found.items()
    }
    totals: dict[int, float] = {}
    for pk, (_, conversation, order, _, role, length, _) in found.items():
        # A long message takes less of its neighbours' scores.
        taken = min(1.0, ranking.neighbours_up_to / max(length, 1)) if ranking.neighbours_up_to else 1.0
        near = placed.get((conversation, order - 1), 0.0) + placed.get((conversation, order + 1), 0.0)
        total = own[pk] + taken * ranking.neighbour_share * near
        if ranking.second_neighbour_share:
            far = placed.get((conversation, order - 2), 0.0) + placed.get((conversation, order + 2), 0.0)
            total = total + taken * ranking.second_neighbour_share * far
        if one_side and ranking.speaker_share_of_total and role not in named_roles:
            total *= ranking.other_speaker_share
        totals[pk] = total
    return sorted(totals, key=lambda pk: (totals[pk], found[pk][3], pk), reverse=True), totals


def candidates(rng: random.Random, count: int) -> tuple[list[Row], list[Row]]:
    """Messages of a few conversations, many of them next to each other (neighbours count), some
    said at the same moment (ties), each in the keyword half, the meaning half, or both."""
    messages: list[tuple[int, int, int, int, str, int]] = []
    used: set[tuple[int, int]] = set()
    while len(messages) < count:
        conversation = rng.choice([7, 8, 9, 10_000_000_019])
        order = rng.randint(1, 60 if rng.random() < 0.8 else 5_000)
        if (conversation, order) in used:
            continue
        used.add((conversation, order))
        stamp = _microseconds(START) + rng.choice([order * DAY // 7, rng.randint(0, 90) * DAY])
        role, length = rng.choice(["user", "assistant"]), rng.choice([1, 3, 10, 23, 24, 25, 60, 300])
        messages.append((1_000 + len(messages) * 3, conversation, order, stamp, role, length))
    keyword: list[Row] = []
    similar: list[Row] = []
    for message in messages:
        halves = rng.choice(["words", "meaning", "both"])
        if halves in ("words", "both"):
            keyword.append((*message, rng.choice([rng.uniform(0.1, 9.0), 1.5, 3.0])))
        if halves in ("meaning", "both"):
            similar.append((*message, rng.uniform(settings.VECTOR_FLOOR, 1.0)))
    rng.shuffle(keyword)
    rng.shuffle(similar)
    return keyword, similar


@pytest.mark.parametrize("name", list(RANKINGS))
def test_the_numpy_ranking_is_the_plain_rule(name: str) -> None:
    ranking = RANKINGS[name]
    rng = random.Random(name)
    may_2023 = NamedDate(date(2023, 5, 20), date(2023, 5, 20), 0, 0)
    june_2023 = NamedDate(date(2023, 6, 1), date(2023, 6, 30), 0, 0)
    in_2030 = NamedDate(date(2030, 1, 1), date(2030, 12, 31), 0, 0)  # said by no candidate: nobody loses
    namings = [{}, {"ada": "user"}, {"coach": "assistant"}, {"ada": "user", "coach": "assistant"}]
    for case in range(120):
        keyword, similar = candidates(rng, rng.choice([1, 2, 5, 40, 300]))
        if case % 7 == 0:
            keyword = []
        if case % 11 == 0:
            similar = []
        if case % 13 == 0:  # a keyword half that scored nothing
            keyword = [(*row[:6], 0.0) for row in keyword]
        named = namings[case % len(namings)]
        dates = [[], [may_2023], [june_2023, may_2023], [in_2030]][case % 4]
        ranked = _rank(
            Found.of_rows(keyword), Found.of_rows(similar), named=named, dates=dates, ranking=ranking, degraded=""
        )
        order, totals = plain_rule(keyword, similar, named=named, dates=dates, ranking=ranking)
        assert ranked.best_first == order, (name, case)
        assert ranked.totals == totals, (name, case)


def test_nothing_found_ranks_nothing() -> None:
    nothing = Found.of_rows([])
    ranked = _rank(nothing, nothing, named={}, dates=[], ranking=DEFAULT_RANKING, degraded="vectors down")
    assert (ranked.best_first, ranked.totals, ranked.degraded) == ([], {}, "vectors down")


def test_a_neighbour_in_another_conversation_gives_nothing() -> None:
    """Orders next to each other in two conversations are not neighbours (the numbered places
    leave room between conversations)."""
    stamp = _microseconds(START + timedelta(days=1))
    keyword: list[Row] = [
        (1, 5, 10, stamp, "user", 5, 2.0),
        (2, 6, 11, stamp, "user", 5, 1.0),
        (3, 5, 12, stamp, "user", 5, 1.0),
    ]
    ranked = _rank(Found.of_rows(keyword), Found.of_rows([]), named={}, dates=[], ranking=DEFAULT_RANKING, degraded="")
    assert ranked.totals[2] == 0.5  # its own only: 11 is next to 10 and 12, but in conversation 6
    assert ranked.totals[1] == 1.0 + DEFAULT_RANKING.second_neighbour_share * 0.5
    assert ranked.best_first == [1, 3, 2]


def test_a_long_message_takes_less_of_its_neighbours_scores() -> None:
    stamp = _microseconds(START + timedelta(days=1))
    up_to = DEFAULT_RANKING.neighbours_up_to
    keyword: list[Row] = [
        (1, 5, 10, stamp, "user", 3, 1.0),  # a question that found the long answer after it
        (2, 5, 11, stamp, "assistant", 4 * up_to, 0.5),  # a long answer: a quarter of the share
        (3, 5, 12, stamp, "user", up_to, 0.5),  # just within: the whole share
    ]
    taking = replace(DEFAULT_RANKING, neighbours_give_up_to=0)  # every message gives its whole score
    ranked = _rank(Found.of_rows(keyword), Found.of_rows([]), named={}, dates=[], ranking=taking, degraded="")
    share, second = DEFAULT_RANKING.neighbour_share, DEFAULT_RANKING.second_neighbour_share
    assert ranked.totals[2] == 0.5 + 0.25 * share * (1.0 + 0.5)
    assert ranked.totals[3] == 0.5 + share * 0.5 + second * 1.0
    whole = _rank(
        Found.of_rows(keyword), Found.of_rows([]), named={}, dates=[],
        ranking=replace(taking, neighbours_up_to=0), degraded="",
    )  # fmt: skip
    assert whole.totals[2] == 0.5 + share * (1.0 + 0.5)


def test_a_long_message_gives_less_of_its_score_to_its_neighbours() -> None:
    stamp = _microseconds(START + timedelta(days=1))
    up_to = DEFAULT_RANKING.neighbours_give_up_to
    giving = replace(DEFAULT_RANKING, neighbours_up_to=0)  # every message takes its whole share
    keyword: list[Row] = [
        (1, 5, 10, stamp, "assistant", 4 * up_to, 1.0),  # a long answer: a quarter of its score
        (2, 5, 11, stamp, "user", 2, 0.25),  # "thanks, the roses..."
        (3, 5, 12, stamp, "assistant", up_to, 0.5),  # just within: its whole score
    ]
    ranked = _rank(Found.of_rows(keyword), Found.of_rows([]), named={}, dates=[], ranking=giving, degraded="")
    share, second = DEFAULT_RANKING.neighbour_share, DEFAULT_RANKING.second_neighbour_share
    assert ranked.totals[2] == 0.25 + share * (1.0 * 0.25 + 0.5)
    assert ranked.totals[3] == 0.5 + share * 0.25 + second * (1.0 * 0.25)
    assert ranked.totals[1] == 1.0 + share * 0.25 + second * 0.5
