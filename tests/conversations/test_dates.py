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
