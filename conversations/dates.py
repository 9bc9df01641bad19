"""Dates a query names ("on 25 May, 2022", "in April 2022", "December 1, 2023", "in 2024"), as spans of days.

Messages carry the time they were said (a history import keeps each message's real date), so a
question that names a date is asking about what was said around it. Only dates that name their
year are read (a bare "25 May" could be any year); English month names only, and anything else
is left alone (a query in another language simply names no date here).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Most specific first: a day's date, then a month's, then a year's; each span of text is read once.
_PATTERNS = [
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b", re.IGNORECASE)),
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.IGNORECASE)),
    ("day", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b")),
    ("month", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("year", re.compile(rf"\b{_YEAR}\b")),
]


# The words that lead into a date ("on", "as of", "in the week before"): cut out with it.
_LEADING = re.compile(
    r"(?:\b(?:on|in|by|of|as|during|since|until|before|after|around|between|and|from|to)\b[\s,]*)+$", re.IGNORECASE
)


@dataclass(frozen=True)
class NamedDate:
    """A date the query names: the days it covers (first and last, inclusive) and where it was said."""

    first: date
    last: date
    start: int  # its place in the query's text
    end: int

    def window(self, *, slack_days: int = 0) -> tuple[datetime, datetime]:
        """The moments on these days (in UTC), give or take slack_days: from the first, up to but not the second."""
        start = datetime.combine(self.first - timedelta(days=slack_days), time(), tzinfo=UTC)
        end = datetime.combine(self.last + timedelta(days=slack_days + 1), time(), tzinfo=UTC)
        return start, end

    def covers(self, at: datetime, *, slack_days: int = 0) -> bool:
        """Whether a moment falls on one of these days (in UTC), give or take slack_days."""
        start, end = self.window(slack_days=slack_days)
        return start <= at < end


def _month(raw: str) -> int:
    return int(raw) if raw.isdigit() else _MONTHS[raw.lower().rstrip(".")]


def named_dates(text: str, *, today: date | None = None) -> list[NamedDate]:
    """The dates the text names, in order of where they are said. With `today` (the day the query
    is asked), relative ones too ("yesterday", "last Friday", "two weeks ago", "in May", "last
    month", "this year"), as the days they cover on the calendar before it; without, only those
    that name their year."""
    found: list[NamedDate] = []
    taken: list[tuple[int, int]] = []
    if today is not None:
        for match, first, last in relative_dates(text, today):
            taken.append((match.start(), match.end()))
            found.append(NamedDate(first, last, match.start(), match.end()))
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            taken.append((match.start(), match.end()))  # read once, a date or not
            year = int(match["year"])
            try:
                if kind == "day":
                    first = last = date(year, _month(match["month"]), int(match["day"]))
                elif kind == "month":
                    month = _month(match["month"])
                    first = date(year, month, 1)
                    last = date(year, month, calendar.monthrange(year, month)[1])
                else:
                    first, last = date(year, 1, 1), date(year, 12, 31)
            except ValueError:  # "31 February, 2023", "Sept 0, 2023": not a date
                continue
            found.append(NamedDate(first, last, match.start(), match.end()))
    return sorted(found, key=lambda named: named.start)


_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3, "few": 3, "several": 3,
}  # fmt: skip
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(sorted((re.escape(n) for n in _NUMBERS), key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_MONTH_NAME = r"(?P<month>" + "|".join(name.lower() for name in calendar.month_name if name) + r")"
# How far either side of "N units ago" the day may be: people round ("two months ago" is rarely
# to the day); the search's own slack (DATE_SLACK_DAYS) comes on top.
_AGO_SPREAD = {"day": 0, "week": 3, "month": 10, "year": 60}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_RELATIVE = [
    ("ago", re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.IGNORECASE)),
    ("past", re.compile(rf"\b(?:the\s+)?(?:past|last)\s+{_COUNT}\s+{_UNIT}\b", re.IGNORECASE)),
    ("before_yesterday", re.compile(r"\bthe\s+day\s+before\s+yesterday\b", re.IGNORECASE)),
    ("yesterday", re.compile(r"\byesterday\b", re.IGNORECASE)),
    ("today", re.compile(r"\b(?:today|tonight|this\s+morning|this\s+afternoon|this\s+evening)\b", re.IGNORECASE)),
    ("weekday", re.compile(rf"\b(?:last|this\s+past|past)\s+{_WEEKDAY}\b", re.IGNORECASE)),
    ("weekend", re.compile(r"\b(?:last|this\s+past|past)\s+weekend\b", re.IGNORECASE)),
    ("last_week", re.compile(r"\blast\s+week\b", re.IGNORECASE)),
    ("past_week", re.compile(r"\b(?:the\s+)?past\s+week\b", re.IGNORECASE)),
    ("this_week", re.compile(r"\bthis\s+week\b", re.IGNORECASE)),
    ("last_month", re.compile(r"\b(?:last|past)\s+month\b", re.IGNORECASE)),
    ("this_month", re.compile(r"\bthis\s+month\b", re.IGNORECASE)),
    ("last_year", re.compile(r"\blast\s+year\b", re.IGNORECASE)),
    ("this_year", re.compile(r"\bthis\s+year\b", re.IGNORECASE)),
    # A month named without its year: the last one that has begun ("in May", asked in June 2023 or
    # in May 2023: May 2023; asked in April 2023: May 2022). Not when a year follows: that is a date.
    ("month", re.compile(rf"\b(?:in|during|since|early|late|mid)[\s-]+{_MONTH_NAME}\b(?!,?\s*(?:\d|of\s+\d))", re.IGNORECASE)),
]  # fmt: skip


def _month_span(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def relative_dates(text: str, today: date) -> list[tuple[re.Match[str], date, date]]:
    """The relative dates the text names, read against `today`: each match with its first and last
    day. Each span of text is read once, the most specific pattern first."""
    found: list[tuple[re.Match[str], date, date]] = []
    taken: list[tuple[int, int]] = []
    monday = today - timedelta(days=today.weekday())
    for kind, pattern in _RELATIVE:
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            if kind in ("ago", "past"):
                count_text = match["count"].lower()
                count = int(count_text) if count_text.isdigit() else _NUMBERS[re.sub(r"\s+", " ", count_text)]
                unit = match["unit"].lower()
                back = timedelta(days=count * _UNIT_DAYS[unit])
                if kind == "ago":
                    spread = timedelta(days=_AGO_SPREAD[unit] * (1 if count < 4 else 2))
                    first, last = today - back - spread, min(today, today - back + spread)
                else:
                    first, last = today - back, today
            elif kind == "before_yesterday":
                first = last = today - timedelta(days=2)
            elif kind == "yesterday":
                first = last = today - timedelta(days=1)
            elif kind == "today":
                first = last = today
            elif kind == "weekday":
                back_days = (today.weekday() - _WEEKDAYS[match["weekday"].lower()] - 1) % 7 + 1
                first = last = today - timedelta(days=back_days)
            elif kind == "weekend":
                saturday = monday - timedelta(days=2) if today.weekday() < 5 else monday + timedelta(days=5)
                if saturday >= today:
                    saturday -= timedelta(days=7)
                first, last = saturday, saturday + timedelta(days=1)
            elif kind == "last_week":
                first, last = monday - timedelta(days=7), monday - timedelta(days=1)
            elif kind == "past_week":
                first, last = today - timedelta(days=7), today
            elif kind == "this_week":
                first, last = monday, today
            elif kind == "last_month":
                previous = today.replace(day=1) - timedelta(days=1)
                first, last = _month_span(previous.year, previous.month)
            elif kind == "this_month":
                first, last = today.replace(day=1), today
            elif kind == "last_year":
                first, last = date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)
            elif kind == "this_year":
                first, last = date(today.year, 1, 1), today
            else:  # a month without its year
                month = _MONTHS[match["month"].lower()]
                year = today.year if month <= today.month else today.year - 1
                first, last = _month_span(year, month)
                last = min(last, today)
            taken.append((match.start(), match.end()))
            found.append((match, first, last))
    return found


def without_dates(text: str, dates: list[NamedDate]) -> str:
    """The text with the dates it names cut out (what is left is what the query asks about them)."""
    kept, at = [], 0
    for named in dates:
        kept.append(_LEADING.sub("", text[at : named.start]))
        at = named.end
    kept.append(text[at:])
    return re.sub(r"\s+", " ", "".join(kept)).strip()
