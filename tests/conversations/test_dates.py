"""Dates a query names: the days each covers, and the query without them."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from conversations.dates import named_dates, without_dates


def spans(text):
    return [(named.first, named.last) for named in named_dates(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did Nate cook on 25 May, 2022?", [(date(2022, 5, 25), date(2022, 5, 25))]),
        ("What book did Tim finish on 8th December, 2023?", [(date(2023, 12, 8), date(2023, 12, 8))]),
        ("Which movie did he watch on October 6, 2022?", [(date(2022, 10, 6), date(2022, 10, 6))]),
        ("Where was the photo shared on December 1,2023 taken?", [(date(2023, 12, 1), date(2023, 12, 1))]),
        ("What happened on 2024-02-29?", [(date(2024, 2, 29), date(2024, 2, 29))]),
        ("What did she paint in April 2022?", [(date(2022, 4, 1), date(2022, 4, 30))]),
        ("Any news from Feb. 2024", [(date(2024, 2, 1), date(2024, 2, 29))]),
        ("What charity event was organised in 2024?", [(date(2024, 1, 1), date(2024, 12, 31))]),
        (
            "From March 2021 to 3 June 2022",
            [(date(2021, 3, 1), date(2021, 3, 31)), (date(2022, 6, 3), date(2022, 6, 3))],
        ),
    ],
)
def test_a_named_date_covers_its_day_month_or_year(text, expected):
    assert spans(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "What did Nate cook on 25 May?",  # no year: which May is not said
        "I may go in March",
        "He scored 2 points in 1850",  # a year outside 1900-2099 reads as a number
        "Meet on 31 February, 2023",  # no such day (and not read again as February)
    ],
)
def test_text_without_a_whole_date_names_none(text):
    assert named_dates(text) == []


def test_month_names_are_read_in_english_only_and_a_year_in_any_language():
    assert spans("Что ты делала 25 мая 2022 года?") == [(date(2022, 1, 1), date(2022, 12, 31))]


def test_the_query_without_its_dates_keeps_what_it_asks_about_them():
    text = "What was Tim's writing issue, as mentioned on November 6, 2023?"
    assert without_dates(text, named_dates(text)) == "What was Tim's writing issue, as mentioned ?"
    text = "What did she paint in April 2022 and sell in 2023"
    assert without_dates(text, named_dates(text)) == "What did she paint and sell"
    assert without_dates("Nothing dated", []) == "Nothing dated"


def test_a_named_date_covers_a_moment_on_its_days_give_or_take_some():
    (named,) = named_dates("on 25 May, 2022")
    assert named.covers(datetime(2022, 5, 25, 23, 59, tzinfo=UTC))
    assert not named.covers(datetime(2022, 5, 26, 0, 0, tzinfo=UTC))
    assert named.covers(datetime(2022, 6, 1, 12, 0, tzinfo=UTC), slack_days=7)
    assert not named.covers(datetime(2022, 6, 2, 0, 0, tzinfo=UTC), slack_days=7)
    assert named.covers(datetime(2022, 5, 18, 0, 0, tzinfo=UTC), slack_days=7)


# --- relative dates, read against the day the query is asked -----------------------------------

WEDNESDAY = date(2023, 5, 31)  # asked on Wednesday 31 May 2023


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("What did I do yesterday?", date(2023, 5, 30), date(2023, 5, 30)),
        ("the day before yesterday", date(2023, 5, 29), date(2023, 5, 29)),
        ("What did I eat today?", WEDNESDAY, WEDNESDAY),
        ("What artist did I start listening to last Friday?", date(2023, 5, 26), date(2023, 5, 26)),
        ("and last Wednesday?", date(2023, 5, 24), date(2023, 5, 24)),  # not today: a week ago
        ("this past Tuesday", date(2023, 5, 30), date(2023, 5, 30)),
        ("What did I do last weekend?", date(2023, 5, 27), date(2023, 5, 28)),
        ("What did I post 5 days ago?", date(2023, 5, 26), date(2023, 5, 26)),
        ("a milestone I mentioned four weeks ago", date(2023, 4, 27), date(2023, 5, 9)),
        ("two weeks ago", date(2023, 5, 14), date(2023, 5, 20)),
        ("a couple of months ago", date(2023, 3, 22), date(2023, 4, 11)),
        ("a year ago", date(2022, 4, 1), date(2022, 7, 30)),
        ("in the past few months", date(2023, 3, 2), WEDNESDAY),
        ("over the last 10 days", date(2023, 5, 21), WEDNESDAY),
        ("last week", date(2023, 5, 22), date(2023, 5, 28)),
        ("this week", date(2023, 5, 29), WEDNESDAY),
        ("the past week", date(2023, 5, 24), WEDNESDAY),
        ("last month", date(2023, 4, 1), date(2023, 4, 30)),
        ("this month", date(2023, 5, 1), WEDNESDAY),
        ("How many trips did I take this year?", date(2023, 1, 1), WEDNESDAY),
        ("last year", date(2022, 1, 1), date(2022, 12, 31)),
        ("What did I buy in May?", date(2023, 5, 1), WEDNESDAY),  # this May, so far
        ("What did I buy in March?", date(2023, 3, 1), date(2023, 3, 31)),
        ("What did I plant in early September?", date(2022, 9, 1), date(2022, 9, 30)),  # the last one begun
    ],
)
def test_a_relative_date_covers_the_days_it_means_before_the_day_asked(text, first, last):
    (named,) = named_dates(text, today=WEDNESDAY)
    assert (named.first, named.last) == (first, last)
    assert text[named.start : named.end].strip()


@pytest.mark.parametrize(
    "text",
    [
        "How many days ago did I run the 5K?",  # asks for a count: names no date
        "How many weeks ago did I attend the workshop?",
        "I may go in a few days",
        "Do you think I should run every day?",
        "What did I buy in May 2021?",  # a whole date, read as one (below)
    ],
)
def test_phrases_that_name_no_relative_date_are_left_alone(text):
    relative = [named for named in named_dates(text, today=WEDNESDAY) if named.first.year != 2021]
    assert relative == []


def test_relative_dates_are_read_only_when_the_day_asked_is_known():
    assert named_dates("What did I do last Friday?") == []
    (absolute,) = named_dates("in May 2021", today=WEDNESDAY)
    assert (absolute.first, absolute.last) == (date(2021, 5, 1), date(2021, 5, 31))


def test_the_query_without_a_relative_date_keeps_what_it_asks():
    text = "What artist did I start listening to last Friday?"
    assert without_dates(text, named_dates(text, today=WEDNESDAY)) == "What artist did I start listening ?"
